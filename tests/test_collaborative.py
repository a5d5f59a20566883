"""The collaborative pattern: plan → research → write → review, revising on the reviewer's word."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import InjectedToolArg, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from teamgraph import SpecError, prompts
from teamgraph.brief import Brief
from teamgraph.config import Settings
from teamgraph.patterns.collaborative import ReviewVerdict
from teamgraph.runtime.team_api import Team
from teamgraph.testing import ScriptedChatModel, ToolCall

from .helpers import by_type, make_team, member

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "teams"
ROLES = ["planner", "researcher", "writer", "reviewer"]
CREW = {"name": "crew", "pattern": "collaborative"}


def _crew(**researcher: Any) -> list[dict[str, Any]]:
    """A member per role, each named for it; ``researcher``: more fields of the researcher."""
    return [member(r, **(researcher if r == "researcher" else {})) for r in ROLES]


def _reviewer(*verdicts: dict[str, Any]) -> ScriptedChatModel:
    """Each review is a free-text answer, then the structured verdict."""
    script: list[Any] = []
    for verdict in verdicts:
        script += ["my review", verdict]
    return ScriptedChatModel(responses=script)


async def _run(team: Team, request: str, run_id: str = "r1") -> tuple[Any, list[Any], Any]:
    async with team.runner() as runner:
        events = [e async for e in runner.stream(request, run_id=run_id, thread_id="t")]
        state = await runner.thread_state("t")
        return await runner.result(run_id), events, state


def _last_human(messages: list[BaseMessage]) -> str:
    return [m for m in messages if isinstance(m, HumanMessage)][-1].text


async def test_approval_on_the_second_iteration(settings: Settings) -> None:
    planner = ScriptedChatModel(responses=["1. what it is 2. numbers"])
    researcher = ScriptedChatModel(responses=["facts v1", "facts v2 with numbers"])
    writer = ScriptedChatModel(responses=["draft v1", "draft v2 with numbers"])
    reviewer = _reviewer(
        {"approved": False, "feedback": "add numbers"}, {"approved": True, "feedback": ""}
    )
    models = {"planner": planner, "researcher": researcher, "writer": writer, "reviewer": reviewer}
    result, events, state = await _run(
        make_team(settings, *_crew(), **CREW, models=models), "explain MVCC"
    )
    assert (result.status, result.output, result.error) == (
        "completed",
        "draft v2 with numbers",
        "",
    )
    assert state["verdicts"] == [
        {"iteration": 1, "approved": False, "feedback": "add numbers"},
        {"iteration": 2, "approved": True, "feedback": ""},
    ]
    assert (state["plan_text"], state["research"], state["iteration"]) == (
        "1. what it is 2. numbers",
        "facts v2 with numbers",
        2,
    )
    # the second round sees the feedback: research and writing, the writer its previous draft
    revision = _last_human(writer.calls[1])
    assert "### reviewer feedback\nadd numbers" in revision
    assert "### previous draft\ndraft v1" in revision
    assert "### research\nfacts v2 with numbers" in revision
    assert "### reviewer feedback\nadd numbers" in _last_human(researcher.calls[1])
    assert "reviewer feedback" not in _last_human(writer.calls[0])
    # the reviewer read the draft under review, then was asked for the structured verdict
    assert _last_human(reviewer.calls[0]).endswith("### draft\ndraft v1")
    assert "ReviewVerdict" in _last_human(reviewer.calls[1])
    hops = [(h.from_agent, h.to_agent, h.reason) for h in by_type(events, "handoff")]
    assert hops == [
        ("planner", "researcher", "plan ready"),
        ("researcher", "writer", "research ready"),
        ("writer", "reviewer", "draft 1 ready for review"),
        ("reviewer", "researcher", "revise: add numbers"),
        ("researcher", "writer", "research ready"),
        ("writer", "reviewer", "draft 2 ready for review"),
    ]


async def test_stop_at_max_iterations_with_the_last_draft(settings: Settings) -> None:
    models = {
        "planner": ScriptedChatModel(responses=["plan"]),
        "researcher": ScriptedChatModel(responses=["facts 1", "facts 2"]),
        "writer": ScriptedChatModel(responses=["draft 1", "draft 2"]),
        "reviewer": _reviewer(
            {"approved": False, "feedback": "too short"},
            {"approved": False, "feedback": "still too short"},
        ),
    }
    team = make_team(settings, *_crew(), **CREW, collaborative={"max_iterations": 2}, models=models)
    result, events, state = await _run(team, "explain MVCC")
    assert result.status == "completed"
    assert result.output == "draft 2"
    assert result.error == "reviewer did not approve within max_iterations=2"
    assert [v["approved"] for v in state["verdicts"]] == [False, False]
    assert state["feedback"] == "still too short"
    assert [h.to_agent for h in by_type(events, "handoff")].count("researcher") == 2


async def test_roles_can_be_assigned_to_any_member(settings: Settings) -> None:
    members = [
        {"name": "ann", "description": "plans and writes"},
        {"name": "ray", "description": "researches"},
        {"name": "rex", "description": "reviews"},
    ]
    ann = ScriptedChatModel(responses=["the plan", "the draft"])
    models = {
        "ann": ann,
        "ray": ScriptedChatModel(responses=["the facts"]),
        "rex": _reviewer({"approved": True}),
    }
    roles = {"planner": "ann", "researcher": "ray", "writer": "ann", "reviewer": "rex"}
    team = Team.from_dict(
        {"name": "trio", "pattern": "collaborative", "members": members, "collaborative": roles},
        settings=settings,
        models=models,
    )
    result, events, _ = await _run(team, "explain MVCC")
    assert (result.status, result.output) == ("completed", "the draft")
    hops = [(h.from_agent, h.to_agent) for h in by_type(events, "handoff")]
    assert hops == [("ann", "ray"), ("ray", "ann"), ("ann", "rex")]


@tool
def note(value: str, state: Annotated[dict[str, Any], InjectedToolArg]) -> str:
    """Note a finding in the team's shared state."""
    state["finding"] = value
    return "noted"


async def test_roles_share_the_teams_state(settings: Settings) -> None:
    writer = ScriptedChatModel(responses=["draft"])
    models = {
        "planner": ScriptedChatModel(responses=["plan"]),
        "researcher": ScriptedChatModel(responses=[ToolCall("note", {"value": "42"}), "facts"]),
        "writer": writer,
        "reviewer": _reviewer({"approved": True}),
    }
    team = make_team(
        settings,
        *_crew(tools=["note"]),
        **CREW,
        initial_state={"finding": None},
        models=models,
        tools=[note],
    )
    result, _, state = await _run(team, "find the answer")
    assert result.status == "completed"
    assert state["shared_state"] == {"finding": "42"}
    assert '"finding": "42"' in _last_human(writer.calls[0])


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    deleted.append(record_id)
    return f"deleted {record_id}"


deleted: list[str] = []


async def test_a_sensitive_call_pauses_a_role_and_resumes_once(settings: Settings) -> None:
    deleted.clear()
    models = {
        "planner": ScriptedChatModel(responses=["plan"]),
        "researcher": ScriptedChatModel(
            responses=[ToolCall("delete_record", {"record_id": "7"}), "record 7 deleted"]
        ),
        "writer": ScriptedChatModel(responses=["draft"]),
        "reviewer": _reviewer({"approved": True}),
    }
    crew = _crew(tools=["delete_record"])
    team = make_team(settings, *crew, **CREW, models=models, tools=[delete_record])
    async with team.runner() as runner:
        events = [e async for e in runner.stream("clean up", run_id="r1")]
        assert [a.tool for a in by_type(events, "approval_requested")] == ["delete_record"]
        assert deleted == []
        resumed = [e async for e in runner.resume_stream("r1", default={"action": "approve"})]
        result = await runner.result("r1")
    assert deleted == ["7"]
    assert (result.status, result.output) == ("completed", "draft")
    before = [h.to_agent for h in by_type(events, "handoff")]
    after = [h.to_agent for h in by_type(resumed, "handoff")]
    assert (before, after) == (["researcher"], ["writer", "reviewer"])


def test_a_missing_role_is_an_error_at_build_time(settings: Settings) -> None:
    members = [
        {"name": "planner", "description": "p"},
        {"name": "researcher", "description": "r"},
        {"name": "writer", "description": "w"},
        {"name": "critic", "description": "c"},
    ]
    team = Team.from_dict({"name": "crew", "pattern": "collaborative", "members": members})
    from teamgraph.patterns import build

    with pytest.raises(SpecError) as caught:
        build(team.spec)
    message = str(caught.value)
    assert "reviewer role" in message and "collaborative.reviewer" in message
    assert "planner, researcher, writer, critic" in message


def test_the_verdict_tool_name_is_the_one_the_offline_model_knows() -> None:
    name = convert_to_openai_tool(ReviewVerdict)["function"]["name"]
    assert name == prompts.REVIEW_VERDICT_TOOL


async def test_offline_example_runs(settings: Settings) -> None:
    team = Team.from_yaml(EXAMPLES / "collaborative.yaml", settings=settings)
    result, events, state = await _run(team, "Explain how PostgreSQL handles MVCC and vacuum")
    assert (result.status, result.error) == ("completed", "")
    assert state["verdicts"] == [{"iteration": 1, "approved": True, "feedback": ""}]
    assert "search_docs" in [e.tool for e in by_type(events, "tool_called")]
    assert "MVCC" in result.output and result.output == state["draft"]
    assert [h.to_agent for h in by_type(events, "handoff")] == ["researcher", "writer", "critic"]


def _offline(
    brief: Brief,
    messages: list[BaseMessage],
    tools: tuple[Any, ...] = (),
    choice: Any = None,
) -> Any:
    from teamgraph.llm.offline import respond

    return respond(messages, [convert_to_openai_tool(t) for t in tools], choice, brief)


@pytest.mark.parametrize(("draft", "approved"), [("A draft.", True), ("  ", False)])
def test_offline_reviewer_approves_a_non_empty_draft(draft: str, approved: bool) -> None:
    from langchain_core.messages import AIMessage, SystemMessage

    review = prompts.collab_review("explain MVCC", "facts", draft)
    messages = [
        SystemMessage("You are critic, a reviewer"),
        HumanMessage(review.text),
        AIMessage("my review"),
        HumanMessage(prompts.structured_request("{}")),
    ]
    brief = replace(review.brief, role="structured", schema="ReviewVerdict")
    reply = _offline(brief, messages, (ReviewVerdict,), "any")
    (call,) = reply.tool_calls
    assert call["name"] == "ReviewVerdict"
    assert call["args"]["approved"] is approved
    assert bool(call["args"]["feedback"]) is not approved


def test_offline_planner_outlines_by_keyword_rules() -> None:
    from langchain_core.messages import SystemMessage

    outline = prompts.collab_plan("Compare PostgreSQL and MongoDB on security and cost")
    reply = _offline(outline.brief, [SystemMessage("You are planner"), HumanMessage(outline.text)])
    points = [line for line in reply.text.splitlines() if line[:2] in ("1.", "2.", "3.")]
    assert len(points) == 3 and "security" in points[0] and "cost" in points[1]
