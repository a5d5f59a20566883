from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from teamgraph.testing import FunctionChatModel, ScriptedChatModel

from .helpers import by_type, is_planner, plan_json, run_collect, workflow_team


async def test_explicit_template_appends_the_request_and_skips_the_model_planner(
    settings: Any,
) -> None:
    model = FunctionChatModel(fn=lambda m: "done")
    team = workflow_team(settings, model)
    result, _ = await run_collect(team, "Quantum batteries", template="research_report")
    assert result.planner_tier == "template"
    assert [s.id for s in result.steps] == ["research", "analysis", "report"]
    for step in result.steps:
        assert step.task.endswith("User's original request: Quantum batteries")
    assert not any(is_planner(call) for call in model.calls)


async def test_unknown_template_falls_through_to_the_model_plan(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> str:
        return (
            "```json\n" + plan_json(("only", "writer", [])) + "\n```"
            if is_planner(messages)
            else "written"
        )

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    result, events = await run_collect(team, "Write a haiku", template="no_such_template")
    assert result.planner_tier == "llm"  # fenced JSON accepted
    assert [s.id for s in result.steps] == ["only"]
    assert by_type(events, "plan_created")[0].tier == "llm"


async def test_one_repair_round_sends_the_validation_errors_back(settings: Any) -> None:
    replies = iter([plan_json(("a", "poet", [])), plan_json(("a", "writer", []))])
    planner_calls: list[list[BaseMessage]] = []

    def fn(messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            planner_calls.append(messages)
            return next(replies)
        return "ok"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    result, _ = await run_collect(team, "Write a poem about rain")
    assert result.planner_tier == "llm"
    assert len(planner_calls) == 2
    repair = str(planner_calls[1][-1].content)
    assert "Your plan is invalid" in repair and "unknown worker 'poet'" in repair


async def test_still_invalid_plan_falls_back_to_rules(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> str:
        return plan_json(("a", "b", ["a"])) if is_planner(messages) else "ok"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    result, _ = await run_collect(team, "Compare Rust and Go on speed and safety")
    assert result.planner_tier == "rules"
    ids = [s.id for s in result.steps]
    assert ids == ["research_speed", "research_safety", "summary"]
    assert result.plan is not None and result.plan.steps[2].depends_on == ids[:2]


async def test_low_confidence_plan_falls_back_to_rules(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            return plan_json(("a", "writer", []), confidence=0.2)
        return "ok"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    result, _ = await run_collect(team, "First gather the sales data, then analyze the trend")
    assert result.planner_tier == "rules"
    assert [s.depends_on for s in _steps(result)] == [[], ["step_1"]]


async def test_template_match_rules_are_used_by_the_rules_tier(settings: Any) -> None:
    planner = FunctionChatModel(fn=lambda m: "not json at all" if is_planner(m) else "ok")
    team = workflow_team(settings, planner)
    team.spec.members.append(team.spec.members[0].model_copy(update={"name": "coder"}))
    team.spec.members.append(team.spec.members[0].model_copy(update={"name": "critic"}))
    result, _ = await run_collect(team, "Please review this Python code for bugs")
    assert result.planner_tier == "template"  # what made the plan: the matched template
    assert result.plan is not None and result.plan.name == "code_review"


async def test_last_resort_is_one_step_on_the_default_worker(settings: Any) -> None:
    model = ScriptedChatModel(responses=[ValueError("planner broke"), "the answer"])
    team = workflow_team(settings, model, default_worker="writer")
    result, _ = await run_collect(team, "hello")
    assert result.planner_tier == "fallback"
    assert [(s.id, s.worker, s.task) for s in result.steps] == [("answer", "writer", "hello")]
    assert result.output.endswith("the answer")


def _steps(result: Any) -> list[Any]:
    return list(result.plan.steps)


def _broken(messages: list[BaseMessage]) -> str:
    raise ValueError("planner broke")


@pytest.mark.parametrize(
    "planner", [_broken, lambda m: "not json at all"], ids=["raises", "no plan"]
)
async def test_a_failed_planner_runs_one_step_on_the_default_worker(
    settings: Any, planner: Any
) -> None:
    """Issue 31: the model planner raising, or replying no plan at all (twice), is a planner
    failure — one step on the team's ``default_worker``, never a rule router's clear match."""
    request = "Compare Rust and Go on speed and safety"  # the rules would make three steps

    def fn(messages: list[BaseMessage]) -> str:
        return str(planner(messages)) if is_planner(messages) else "the answer"

    team = workflow_team(settings, FunctionChatModel(fn=fn), default_worker="writer")
    result, events = await run_collect(team, request)
    assert result.planner_tier == "fallback"
    assert [(s.worker, s.task) for s in result.steps] == [("writer", request)]
    notes = by_type(events, "plan_created")[0].notes
    assert any("the model planner failed" in n for n in notes), notes
