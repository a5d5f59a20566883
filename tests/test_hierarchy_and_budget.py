"""Nested teams (three levels, event paths) and budgets (stop cleanly, keep what was done)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import BaseMessage

from teamgraph import Plan, Step
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel

from .helpers import FAST_RETRY, by_type, run_collect, task_of

LEAF = {"name": "leaf", "description": "the innermost team; writes", "members": ["writer"]}
MIDDLE = {
    "name": "middle",
    "description": "a middle team that delegates writing",
    "members": [LEAF],
}
TOP = {"name": "top", "members": [MIDDLE, "researcher"]}


async def test_three_levels_of_nested_teams_with_event_paths(settings: Any) -> None:
    team = Team.from_dict(TOP, settings=settings)
    plan = Plan(steps=[Step(id="delegate", worker="middle", task="Write about PostgreSQL")])
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "completed"
    assert "Offline model" in result.step("delegate").output
    paths = {tuple(e.path) for e in by_type(events, "agent_message")}
    assert ("top", "middle", "leaf", "writer") in paths
    assert all(e.run_id == result.run_id for e in events)  # one stream for the whole tree
    plans = [(tuple(e.path), e.parent_id) for e in by_type(events, "plan_created")]
    assert plans == [  # each nested team names the step it works for
        (("top",), None),
        (("top", "middle"), "delegate"),
        (("top", "middle", "leaf"), "task"),
    ]


async def test_a_nested_teams_work_counts_for_the_step_it_works_for(settings: Any) -> None:
    team = Team.from_dict(TOP, settings=settings)
    plan = Plan(steps=[Step(id="delegate", worker="middle", task="Write about PostgreSQL")])
    result, events = await run_collect(team, "x", plan=plan)
    nested = [e for e in by_type(events, "usage") if e.path[:2] == ["top", "middle"]]
    spent = sum(e.usage.total_tokens for e in nested)
    assert "delegate" not in {e.step_id for e in nested}  # their own steps, their planners
    assert result.step("delegate").usage.total_tokens == spent > 0
    assert result.usage.total_tokens == spent  # counted once in the run's total


def _slow_model(calls: list[str]) -> FunctionChatModel:
    async def fn(messages: list[BaseMessage]) -> str:
        step = task_of(messages)
        calls.append(step)
        await asyncio.sleep(0.05 if step != "task e" else 0.5)
        return f"done {step}"

    return FunctionChatModel(fn=fn)


async def test_a_budget_stops_the_run_and_keeps_finished_steps(settings: Any) -> None:
    calls: list[str] = []
    spec = {
        "name": "b",
        "members": ["researcher"],
        "budget": {"max_model_calls": 3},
        "workflow": {"max_parallel": 2},
        "retry": FAST_RETRY,
    }
    team = Team.from_dict(spec, settings=settings, model=_slow_model(calls))
    plan = Plan(steps=[Step(id=i, worker="researcher", task=f"task {i}") for i in "abcde"])
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "budget_exceeded"
    assert result.error == "budget exceeded: max_model_calls=3 reached (3)"
    done = [s.id for s in result.steps if s.status == "done"]
    assert len(done) == 3 and len(calls) == 3
    skipped = [s for s in result.steps if s.status == "skipped"]
    assert skipped and all("max_model_calls" in s.error for s in skipped)
    for step_id in done:
        assert f"done task {step_id}" in result.output
    assert by_type(events, "run_completed")[0].status == "budget_exceeded"


async def test_token_budget_is_shared_by_nested_teams(settings: Any) -> None:
    spec = {**TOP, "budget": {"max_tokens": 50}}
    team = Team.from_dict(spec, settings=settings)
    first = Step(id="delegate", worker="middle", task="Write about PostgreSQL")
    then = Step(id="again", worker="middle", task="Write about Redis", depends_on=["delegate"])
    result, _ = await run_collect(team, "x", plan=Plan(steps=[first, then]))
    assert result.status == "budget_exceeded" and "max_tokens=50" in result.error


async def test_a_later_run_on_the_thread_does_not_report_an_earlier_budget_stop(
    settings: Any,
) -> None:
    spec = {"name": "b", "members": ["researcher"], "budget": {"max_model_calls": 1}}
    team = Team.from_dict(spec, settings=settings, model=_slow_model([]))
    two_steps = Plan(steps=[Step(id=i, worker="researcher", task=f"task {i}") for i in "ab"])
    one_step = Plan(steps=[Step(id="c", worker="researcher", task="task c")])
    stopped = await team.run("x", thread_id="t", plan=two_steps)
    assert stopped.status == "budget_exceeded" and "max_model_calls=1" in stopped.error
    later = await team.run("y", thread_id="t", plan=one_step)
    assert later.status == "completed"
    assert later.error == "" and later.output.count("done task c") == 1
