"""One model-call path for every caller: budgets hold, usage is counted and announced once, the
journal replays every kind of call, and teamgraph's own models read the brief, not the prompt."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from teamgraph import Plan, Step, prompts
from teamgraph.brief import current_brief
from teamgraph.events import TokenUsage
from teamgraph.result import RunResult
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel, ScriptedChatModel, ToolCall

from .helpers import FAST_RETRY, by_type, run_collect


class Answer(BaseModel):
    city: str


def usage_adds_up(result: RunResult, events: list[Any]) -> None:
    """The usage events of a run add up to what the run reports, per agent and in total."""
    total = sum((e.usage for e in by_type(events, "usage")), TokenUsage())
    assert (total.input_tokens, total.output_tokens) == (
        result.usage.input_tokens,
        result.usage.output_tokens,
    )
    per_agent: dict[str, int] = {}
    for event in by_type(events, "usage"):
        per_agent[event.agent] = per_agent.get(event.agent, 0) + event.usage.total_tokens
    assert per_agent == {k: v.total_tokens for k, v in result.usage_by_agent.items()}


# --- budgets hold for every caller -----------------------------------------------------------
async def test_structured_output_counts_against_the_call_budget(settings: Any) -> None:
    """The answer loop's call and the structured call are two calls: a budget of one stops the
    run at the second (it used to complete after two calls, reporting half the tokens)."""
    spec = {
        "name": "s",
        "pattern": "single",
        "members": [{"name": "geo", "description": "geography", "output_schema": Answer}],
        "budget": {"max_model_calls": 1},
    }
    model = ScriptedChatModel(responses=["Paris", {"city": "Paris"}])
    team = Team.from_dict(spec, settings=settings, model=model)
    result, events = await run_collect(team, "capital of France?")
    assert result.status == "budget_exceeded"
    assert "max_model_calls=1" in result.error
    assert len(model.calls) == 1
    usage_adds_up(result, events)


async def test_structured_output_usage_is_announced_and_counted_once(settings: Any) -> None:
    spec = {
        "name": "s",
        "pattern": "single",
        "members": [{"name": "geo", "description": "geography", "output_schema": Answer}],
    }
    model = ScriptedChatModel(responses=["Paris", {"city": "Paris"}])
    team = Team.from_dict(spec, settings=settings, model=model)
    result, events = await run_collect(team, "capital of France?")
    assert result.status == "completed" and '"Paris"' in result.output
    assert result.usage.total_tokens == 30  # two calls of 10 + 5 tokens
    assert len(by_type(events, "usage")) == 2
    usage_adds_up(result, events)


async def test_the_planner_stops_at_the_call_budget(settings: Any) -> None:
    spec = {
        "name": "w",
        "members": ["researcher", "writer"],
        "budget": {"max_model_calls": 1},
        "retry": FAST_RETRY,
    }
    model = ScriptedChatModel(responses=["not a plan", "still not a plan"])
    team = Team.from_dict(spec, settings=settings, model=model)
    result, events = await run_collect(team, "Compare Redis and PostgreSQL on cost")
    assert result.status == "budget_exceeded" and "max_model_calls=1" in result.error
    assert len(model.calls) == 1  # the repair call was refused, not made
    usage_adds_up(result, events)


async def test_the_supervisor_stops_at_the_call_budget(settings: Any) -> None:
    spec = {
        "name": "sup",
        "pattern": "supervisor",
        "members": ["researcher", "writer"],
        "budget": {"max_model_calls": 2},
    }
    decisions = [
        {"picks": [{"agent": "writer", "instructions": "write"}], "finish": False},
        "the writer's answer",
        {"picks": [], "finish": True, "answer": "done"},
    ]
    model = ScriptedChatModel(responses=decisions)
    team = Team.from_dict(spec, settings=settings, model=model)
    result, events = await run_collect(team, "write something")
    assert result.status == "budget_exceeded"
    assert len(model.calls) == 2
    usage_adds_up(result, events)


async def test_the_moderator_counts_against_the_call_budget(settings: Any) -> None:
    spec = {
        "name": "m",
        "pattern": "single",
        "clarify": True,
        "members": ["researcher"],
        "budget": {"max_model_calls": 1},
    }
    model = ScriptedChatModel(
        responses=[{"needs_clarification": False, "question": ""}, "an answer"]
    )
    team = Team.from_dict(spec, settings=settings, model=model)
    result, events = await run_collect(team, "Explain how PostgreSQL handles MVCC")
    assert result.status == "budget_exceeded"
    assert len(model.calls) == 1
    assert [e.agent for e in by_type(events, "usage")] == ["moderator"]
    usage_adds_up(result, events)


async def test_the_llm_synthesizer_counts_against_the_call_budget(settings: Any) -> None:
    spec = {
        "name": "w",
        "members": ["researcher"],
        "budget": {"max_model_calls": 1},
        "workflow": {"synthesizer": "llm"},
        "retry": FAST_RETRY,
    }
    model = ScriptedChatModel(responses=["step answer", "final answer"])
    team = Team.from_dict(spec, settings=settings, model=model)
    plan = Plan(steps=[Step(id="a", worker="researcher", task="look it up")])
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "budget_exceeded"
    assert len(model.calls) == 1
    usage_adds_up(result, events)


# --- one retry policy, for every caller ------------------------------------------------------
@pytest.mark.parametrize("caller", ["supervisor", "moderator", "structured"])
async def test_transient_errors_are_retried_for_every_caller(settings: Any, caller: str) -> None:
    from teamgraph.testing import transient

    member = {"name": "geo", "description": "geography"}
    spec: dict[str, Any] = {
        "name": "r",
        "pattern": "single",
        "members": [member],
        "retry": FAST_RETRY,
    }
    if caller == "supervisor":
        spec["pattern"] = "supervisor"
        responses: list[Any] = [
            transient(),
            {"picks": [], "finish": True, "answer": "Paris"},
        ]
    elif caller == "moderator":
        spec["clarify"] = True
        responses = [transient(), {"needs_clarification": False, "question": ""}, "Paris"]
    else:
        member["output_schema"] = Answer
        responses = ["Paris", transient(), {"city": "Paris"}]
    model = ScriptedChatModel(responses=responses)
    team = Team.from_dict(spec, settings=settings, model=model)
    result, _ = await run_collect(team, "What is the capital of France?")
    assert result.status == "completed", result.error
    assert "Paris" in result.output


# --- the offline model reads the brief, never the prompt's wording ---------------------------
REWORDED = "Reworded by a test: nothing here is for a parser."


@pytest.mark.parametrize("example", ["research", "supervisor", "swarm", "collaborative"])
async def test_rewording_the_prompts_changes_nothing_offline(
    settings: Any, monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    from .helpers import EXAMPLES

    request = "Compare PostgreSQL and MongoDB on performance and cost"
    first = await Team.from_yaml(EXAMPLES / f"{example}.yaml", settings=settings).run(request)
    for name in (
        "planner_system",
        "synthesizer_system",
        "moderator_system",
        "supervisor_system",
        "supervisor_prompt",
        "worker_system",
    ):
        monkeypatch.setattr(prompts, name, lambda *args, **kwargs: REWORDED)
    again = await Team.from_yaml(EXAMPLES / f"{example}.yaml", settings=settings).run(request)
    assert again.status == first.status == "completed"
    assert again.planner_tier == first.planner_tier
    assert [(s.id, s.worker) for s in again.steps] == [(s.id, s.worker) for s in first.steps]
    assert _without_notice(again.output) == _without_notice(first.output)


def _without_notice(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "Offline model" not in line)


async def test_a_function_model_can_answer_by_the_brief(settings: Any) -> None:
    """The test doubles see the same brief the offline model reads (``current_brief``)."""
    seen: list[tuple[str, str]] = []

    def fn(messages: list[BaseMessage]) -> Any:
        brief = current_brief()
        assert brief is not None
        seen.append((brief.role, brief.task or brief.request))
        if brief.role == "supervisor":
            if any(speaker.startswith("supervisor →") for speaker, _ in brief.transcript):
                return {"picks": [], "finish": True, "answer": "done"}
            return {"picks": [{"agent": "writer", "instructions": "write it"}], "finish": False}
        return AIMessage("written")

    spec = {"name": "sup", "pattern": "supervisor", "members": ["researcher", "writer"]}
    team = Team.from_dict(spec, settings=settings, model=FunctionChatModel(fn=fn))
    result = await team.run("write a poem")
    assert result.status == "completed" and result.output == "done"
    assert seen == [
        ("supervisor", "write a poem"),
        ("agent", "write it"),
        ("supervisor", "write a poem"),
    ]


async def test_tool_calls_inside_structured_agents_keep_their_journal_keys_apart(
    settings: Any,
) -> None:
    """The structured call continues the agent's call count: a replay never hands it the
    agent's first reply."""
    from langchain_core.tools import tool

    @tool
    def lookup(query: str) -> str:
        """Look up a city."""
        return "Paris"

    spec = {
        "name": "s",
        "pattern": "single",
        "members": [
            {
                "name": "geo",
                "description": "geography",
                "tools": ["lookup"],
                "output_schema": Answer,
            }
        ],
    }
    model = ScriptedChatModel(
        responses=[ToolCall("lookup", {"query": "France"}), "Paris it is", {"city": "Paris"}]
    )
    team = Team.from_dict(spec, settings=settings, model=model, tools=[lookup])
    result = await team.run("capital of France?")
    assert result.status == "completed" and '"city": "Paris"' in result.output
