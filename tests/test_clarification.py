"""The clarification gate: a vague request pauses with a question; the answer joins the request."""

from __future__ import annotations

from typing import Any

import pytest

from teamgraph import UsageError
from teamgraph.llm._roles import is_vague
from teamgraph.runtime.team_api import Team

from .helpers import EXAMPLES, by_type, desk_team


def test_offline_vagueness_rule() -> None:
    assert is_vague("help") and is_vague("do something") and is_vague("帮我")
    assert not is_vague("Compare PostgreSQL and MongoDB on cost")


@pytest.mark.parametrize(
    ("request_text", "vague"),
    [
        ("Can you help?", True),
        ("Make it better please", True),
        ("Do the thing we talked about", True),
        ("你可以帮我吗？", True),
        ("幫我搞掂佢", True),
        ("Could you give me a hand?", True),  # a hand, a view: with nothing named
        ("Any suggestions?", True),
        ("Give honest suggestions on my pitch deck", False),
        ("Explain MVCC", False),  # short, but it names its subject
        ("Define entropy", False),
        ("解释一下闭包", False),
        ("Fix the login bug", False),
        # kinds of words that name no subject, not a list of requests
        ("Review this", True),  # a verb of work with nothing to work on
        ("Write tests", False),  # ... but its object is one
        ("Make it pop", True),  # "make it <complement>"
        ("Make the intro punchier", False),
        ("Work your magic", True),  # the helper's own
        ("Please have a quick look", True),  # a light verb's noun
        ("可以 help 我 check 一下吗", True),
        ("帮我改改", True),  # a reduplicated light verb
        ("帮我改改这段代码", False),
        ("Translate this to French: bonjour", False),
    ],
)
def test_vague_means_naming_no_subject(request_text: str, vague: bool) -> None:
    assert is_vague(request_text) is vague


async def test_a_vague_request_pauses_and_resumes_with_the_answer(settings: Any) -> None:
    async with desk_team(settings).runner() as runner:
        events = [e async for e in runner.stream("help me", run_id="c1")]
        question = by_type(events, "clarification_requested")
        assert question and "say more" in question[0].question
        assert (await runner.backend.runs.get("c1")).status == "interrupted"
        assert [p["type"] for p in await runner.pending("c1")] == ["clarification"]
        with pytest.raises(UsageError, match="waits for an answer"):
            _ = [e async for e in runner.resume_stream("c1")]
        resumed = [
            e
            async for e in runner.resume_stream(
                "c1", answer="compare PostgreSQL and MongoDB security"
            )
        ]
        result = await runner.result("c1")
    assert result.status == "completed"
    plan = by_type(resumed, "plan_created")[0]  # planned from the clarified request
    assert any("PostgreSQL" in step["task"] for step in plan.steps)


async def test_a_clear_request_goes_straight_to_planning(settings: Any) -> None:
    result = await desk_team(settings).run("Compare PostgreSQL and MongoDB on security and cost")
    assert result.status == "completed" and result.planner_tier == "rules"


async def test_the_answer_is_what_a_single_agent_searches_for(settings: Any) -> None:
    """The notebook team (one agent with ``search_docs``): after "help" and the answer, the
    search uses the answer's words, not the vague request's."""
    team = Team.from_yaml(EXAMPLES / "notebook.yaml", settings=settings)
    async with team.runner() as runner:
        _ = [e async for e in runner.stream("help", run_id="n1")]
        events = [
            e
            async for e in runner.resume_stream("n1", answer="What does PostgreSQL offer for JSON?")
        ]
    [search] = [e for e in by_type(events, "tool_called") if e.tool == "search_docs"]
    assert "PostgreSQL" in search.args["query"] and "JSON" in search.args["query"]
    result = by_type(events, "run_completed")[0]
    assert "PostgreSQL" in result.output and "No documents matched" not in result.output
