"""Resume hands every step its own result, whatever order steps finished in before."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import BaseMessage

from teamgraph.testing import FunctionChatModel

from .helpers import CEILING_S, Delivered, make_plan, task_of, workflow_team

STEPS = ["s1", "s2", "s3", "s4"]
PLAN = make_plan(*((s, "researcher", []) for s in STEPS), ("final", "writer", STEPS))
Wait = Callable[[], Awaitable[Any]]


def _model(started: list[str], waits: dict[str, Wait] | None = None) -> FunctionChatModel:
    """Answers ``output of <step>``, noting the steps it was called for; a step in ``waits``
    first waits for its condition."""

    async def fn(messages: list[BaseMessage]) -> str:
        step = task_of(messages).removeprefix("task ")
        started.append(step)
        if waits and step in waits:
            await waits[step]()
        return f"output of {step}"

    return FunctionChatModel(fn=fn)


async def test_resume_after_a_crash_keys_results_by_step_id(settings: Any) -> None:
    # s2, s3 and s1 finish in that order (each waits for the one before); s4 never does
    delivered = Delivered()
    waits: dict[str, Wait] = {
        "s3": lambda: delivered.wait_for("step_completed", "s2"),
        "s1": lambda: delivered.wait_for("step_completed", "s3"),
        "s4": lambda: asyncio.sleep(CEILING_S),  # cut by the crash
    }
    first = workflow_team(settings, _model([], waits))
    completed: list[str] = []
    before = delivered.events
    async with first.runner() as runner:
        async for event in runner.stream("x", run_id="crash", plan=PLAN):
            delivered.add(event)
            if event.type == "step_completed":
                completed.append(event.step_id)
            if len(completed) == 3:
                break  # leaving the stream cancels the run mid-flight, like a crash
    assert completed == ["s2", "s3", "s1"]

    resumed_calls: list[str] = []
    second = workflow_team(settings, _model(resumed_calls))
    async with second.runner() as runner:
        events = [e async for e in runner.resume_stream("crash")]
        result = await runner.result("crash")

    assert resumed_calls == ["s4", "final"]  # no completed step ran again
    resumed = next(e for e in events if e.type == "resumed")
    assert resumed.completed_steps == ["s1", "s2", "s3"]
    assert (resumed.tier, [s["id"] for s in resumed.steps]) == ("explicit", [*STEPS, "final"])
    assert not [e for e in events if e.type == "plan_created"]  # the plan came with `resumed`
    # s4 was started (and announced) before the crash: redone, not announced again
    announced = [e.step_id for e in [*before, *events] if e.type == "step_started"]
    assert sorted(announced) == sorted([*STEPS, "final"])
    assert result.status == "completed"
    for step in result.steps:
        assert step.output == f"output of {step.id}"
    final_prompt = str(second.config.model.calls[-1][-1].content)  # type: ignore[union-attr]
    for step_id in STEPS:  # each dependency labelled with its own id and its own output
        assert f"### {step_id}\noutput of {step_id}" in final_prompt
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_finished_runs_cannot_be_resumed(settings: Any) -> None:
    import pytest

    from teamgraph import UsageError

    team = workflow_team(settings, _model([]))
    await team.run("x", run_id="done", plan=PLAN)
    with pytest.raises(UsageError, match="already ended with status 'completed'"):
        await team.resume("done")


async def test_a_run_stopped_before_its_first_checkpoint_starts_again(settings: Any) -> None:
    team = workflow_team(settings)  # the offline model plans
    async with team.runner() as runner:
        stream = runner.stream("Compare Rust and Go on speed and safety", run_id="early")
        assert (await anext(stream)).type == "run_started"
        await stream.aclose()  # cancelled before LangGraph wrote anything
        assert (await runner.backend.runs.get("early")).status == "cancelled"
        events = [e async for e in runner.resume_stream("early")]
        result = await runner.result("early")
    assert result.status == "completed" and events[-1].type == "run_completed"
    assert [s.id for s in result.steps] == ["research_speed", "research_safety", "summary"]
    assert all(s.status == "done" for s in result.steps)
