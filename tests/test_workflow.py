from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Set
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from teamgraph import Plan, Step
from teamgraph.durable import StepRecord
from teamgraph.patterns.workflow import NO_RESULTS, concat_report
from teamgraph.testing import FunctionChatModel, transient

from .helpers import (
    CEILING_S,
    Delivered,
    by_type,
    is_planner,
    make_plan,
    make_team,
    run_collect,
    task_of,
    workflow_team,
)

Wait = Callable[[], Awaitable[Any]]


def _model(waits: dict[str, Wait] | None = None, fail: Set[str] = frozenset()) -> FunctionChatModel:
    """Answers ``output of <step>``; a step in ``waits`` first waits for its condition, a step
    in ``fail`` then raises."""

    async def fn(messages: list[BaseMessage]) -> str:
        step = task_of(messages).removeprefix("task ")
        if waits and step in waits:
            await waits[step]()
        if step in fail:
            raise ValueError(f"{step} exploded")
        return f"output of {step}"

    return FunctionChatModel(fn=fn)


def _until_cancelled() -> Awaitable[None]:
    """A step that never ends on its own: only its run cancelling it stops it (the ceiling only
    keeps a broken run from hanging the suite; it then finishes and the test fails)."""
    return asyncio.sleep(CEILING_S)


def _order(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.type, e.step_id) for e in events if e.type.startswith("step_")]


async def test_a_step_starts_as_soon_as_its_own_dependencies_are_done(settings: Any) -> None:
    delivered = Delivered()  # b ends only once c has started: c must not wait for b
    model = _model(waits={"b": lambda: delivered.wait_for("step_started", "c")})
    team = workflow_team(settings, model)
    plan = make_plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
    result, events = await run_collect(team, "x", delivered, plan=plan)
    order = _order(events)
    assert order.index(("step_started", "c")) < order.index(("step_completed", "b"))
    assert result.status == "completed" and result.planner_tier == "explicit"


async def test_context_holds_only_the_steps_own_dependencies(settings: Any) -> None:
    model = _model()
    team = workflow_team(settings, model)
    plan = make_plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
    await run_collect(team, "x", plan=plan)
    prompt = next(
        str(m.content)
        for call in model.calls
        for m in call
        if isinstance(m, HumanMessage) and str(m.content).startswith("task c")
    )
    assert "## Context from previous steps" in prompt
    assert "### a\noutput of a" in prompt
    assert "output of b" not in prompt


async def test_context_is_trimmed_to_the_token_budget(settings: Any) -> None:
    async def fn(messages: list[BaseMessage]) -> str:
        return "word " * 2000 if task_of(messages) == "task a" else "ok"

    model = FunctionChatModel(fn=fn)
    team = workflow_team(settings, model, context_token_budget=100)
    await run_collect(team, "x", plan=make_plan(("a", "researcher", []), ("c", "writer", ["a"])))
    prompt = str(model.calls[-1][-1].content)
    context = prompt.split("### a\n")[1]
    assert context.endswith("…[trimmed]") and len(context) <= 100 * 4


async def test_a_failing_step_never_cancels_a_running_sibling(settings: Any) -> None:
    delivered = Delivered()  # b ends only once a's failure was told
    model = _model(waits={"b": lambda: delivered.wait_for("step_failed", "a")}, fail={"a"})
    team = workflow_team(settings, model)
    plan = make_plan(
        ("a", "researcher", []),
        ("b", "researcher", []),
        ("c", "writer", ["a"]),
        ("d", "writer", ["c"]),
        ("e", "writer", ["b"]),
    )
    result, events = await run_collect(team, "x", delivered, plan=plan)
    order = _order(events)
    assert order.index(("step_failed", "a")) < order.index(("step_completed", "b"))
    assert result.status == "completed_with_errors"
    assert result.step("a").error == "ValueError: a exploded"
    assert (
        result.step("c").status == "skipped" and "dependency 'a' failed" in result.step("c").error
    )
    assert "dependency 'c' was skipped" in result.step("d").error
    assert result.step("e").output == "output of e"
    assert "**Failed**: ValueError: a exploded" in result.output


async def test_fail_fast_stops_the_run(settings: Any) -> None:
    model = _model(waits={"b": _until_cancelled}, fail={"a"})
    team = workflow_team(settings, model, fail_fast=True)
    result, _ = await run_collect(
        team, "x", plan=make_plan(("a", "researcher", []), ("b", "researcher", []))
    )
    assert result.status == "failed"
    assert result.step("b").status == "skipped" and "fail_fast" in result.step("b").error


async def test_unknown_worker_fails_only_that_step(settings: Any) -> None:
    from teamgraph.patterns._steps import run_step

    team = workflow_team(settings, _model())
    async with team.runner() as runner:
        ctx = runner._context("r", "t", _null_emitter())
        record = await run_step(Step(id="z", worker="ghost", task="t"), [], ctx)
    assert record.status == "failed"
    assert record.error == "unknown worker 'ghost' (team members: researcher, analyst, writer)"


async def test_transient_errors_retry_and_others_do_not(settings: Any) -> None:
    attempts: dict[str, int] = {}

    def fn(messages: list[BaseMessage]) -> Any:
        step = task_of(messages).removeprefix("task ")
        attempts[step] = attempts.get(step, 0) + 1
        if step == "flaky" and attempts[step] == 1:
            return transient()
        if step == "broken":
            return ValueError("bad request")
        return "fine"

    def raising(messages: list[BaseMessage]) -> Any:
        outcome = fn(messages)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    team = workflow_team(settings, FunctionChatModel(fn=raising))
    result, _ = await run_collect(
        team, "x", plan=make_plan(("flaky", "researcher", []), ("broken", "researcher", []))
    )
    assert attempts == {"flaky": 2, "broken": 1}
    assert result.step("flaky").status == "done"
    assert result.step("broken").status == "failed"


async def test_a_provider_still_failing_after_the_retries_stops_the_run_to_resume(
    settings: Any,
) -> None:
    calls = 0
    down = True

    def fn(messages: list[BaseMessage]) -> str:
        nonlocal calls
        calls += 1
        if down:
            raise transient("429 Too Many Requests")
        return "fine"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    result, _ = await run_collect(team, "x", plan=make_plan(("a", "researcher", [])))
    assert calls == 3 and result.status == "failed"  # stopped, not "completed_with_errors"
    assert "still failing after 3 attempts" in result.error and "429" in result.error
    assert "resume" in result.error
    down = False
    resumed = await team.resume(result.run_id)
    assert resumed.status == "completed" and resumed.step("a").output == "fine"


def test_concat_report_format() -> None:
    plan = make_plan(("a", "researcher", []), ("b", "writer", ["a"]))
    records = {
        "a": StepRecord(step_id="a", worker="researcher", status="done", output="A out"),
        "b": StepRecord(step_id="b", worker="writer", status="done", output="B out"),
    }
    assert concat_report(plan, records) == (
        "# Workflow Results: p\n\n*Completed 2 steps*\n\n"
        "### Step: a (Worker: researcher)\n\n**Task**: task a\n\nA out"
        "\n\n---\n\n"
        "### Step: b (Worker: writer)\n\n**Task**: task b\n\nB out"
    )
    assert concat_report(plan, {}) == NO_RESULTS


async def test_llm_synthesizer_answers_from_step_results(settings: Any) -> None:
    settings = _with_history(settings)

    def fn(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        if system.startswith("You are the synthesizer"):
            assert "### a (researcher)\noutput of a" in str(messages[-1].content)
            return "FINAL ANSWER"
        return "output of a"

    team = workflow_team(settings, FunctionChatModel(fn=fn), synthesizer="llm")
    result, _ = await run_collect(team, "x", plan=make_plan(("a", "researcher", [])))
    assert result.output == "FINAL ANSWER"
    async with team.runner() as runner:
        history = [c async for c in runner.graph.aget_state_history(runner.thread_config("run-1"))]
    assert [c.next for c in reversed(history)][-2:] == [("synthesize",), ()]


async def test_usage_and_cost_per_step_agent_and_run(settings: Any) -> None:
    def fn(messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            from .helpers import plan_json

            return plan_json(("a", "researcher", []), ("b", "writer", ["a"]))
        return "ok"

    model = FunctionChatModel(fn=fn, model_name="gpt-4o-mini", usage=(1000, 500))
    team = workflow_team(settings, model)
    result, events = await run_collect(team, "write something")
    per_call = (1000 * 0.15 + 500 * 0.60) / 1e6
    assert result.usage.input_tokens == 3000 and result.usage.output_tokens == 1500
    assert result.usage.cost_usd == pytest.approx(3 * per_call)
    assert set(result.usage_by_agent) == {"planner", "researcher", "writer"}
    assert result.step("a").usage.total_tokens == 1500
    assert len(by_type(events, "usage")) == 3
    assert by_type(events, "run_completed")[0].usage.cost_usd == pytest.approx(3 * per_call)


async def test_a_new_request_in_the_same_thread_plans_afresh(settings: Any) -> None:
    model = _model()
    team = workflow_team(settings, model)
    first, _ = await run_collect(
        team, "one", plan=make_plan(("a", "researcher", [])), thread_id="T", run_id="r1"
    )
    plan2 = Plan(name="p2", steps=[Step(id="a", worker="writer", task="task again")])
    second, events = await run_collect(team, "two", plan=plan2, thread_id="T", run_id="r2")
    assert first.step("a").output == "output of a"
    assert second.step("a").output == "output of again"
    assert ("step_started", "a") in _order(events)


def _with_history(settings: Any) -> Any:
    """Settings under which a completed run keeps every checkpoint (its graph's path)."""
    return settings.model_copy(update={"compact_runs": False})


def _null_emitter() -> Any:
    from teamgraph.run_context import Emitter

    return Emitter("r", lambda event: None)


async def test_an_explicit_plan_goes_straight_to_execute(settings: Any) -> None:
    settings = _with_history(settings)
    team = workflow_team(settings, _model())
    plan = make_plan(("a", "researcher", []), ("b", "writer", ["a"]))
    async with team.runner() as runner:
        events = [e async for e in runner.stream("x", run_id="r", plan=plan)]
        config = runner.thread_config("r")
        history = [c async for c in runner.graph.aget_state_history(config)]
    assert [e.type for e in events][:3] == ["run_started", "plan_created", "step_started"]
    assert by_type(events, "plan_created")[0].tier == "explicit"
    # input, then straight to execute, which also writes the concat report
    assert [c.next for c in reversed(history)] == [("__start__",), ("execute",), ()]
    assert history[0].values["tier"] == "explicit" and history[0].values["status"] == "completed"


async def test_a_template_plan_goes_straight_to_execute(settings: Any) -> None:
    settings = _with_history(settings)
    team = workflow_team(settings, _model())
    async with team.runner() as runner:
        events = [e async for e in runner.stream("x", run_id="r", template="research_report")]
        history = [c async for c in runner.graph.aget_state_history(runner.thread_config("r"))]
    assert [e.type for e in events][:3] == ["run_started", "plan_created", "step_started"]
    assert by_type(events, "plan_created")[0].tier == "template"
    assert [c.next for c in reversed(history)] == [("__start__",), ("execute",), ()]
    assert history[0].values["tier"] == "template" and history[0].values["status"] == "completed"


async def test_a_template_that_does_not_fit_the_team_is_left_to_the_planner(
    settings: Any,
) -> None:
    team = make_team(
        settings, "researcher", "writer", model=_model()
    )  # the template needs an analyst
    result, events = await run_collect(team, "x", template="research_report")
    plan = by_type(events, "plan_created")[0]
    assert result.status == "completed" and plan.tier != "template"
    assert any("'research_report' does not fit this team" in note for note in plan.notes)


async def test_an_invalid_explicit_plan_fails_the_run_with_its_problems(settings: Any) -> None:
    team = workflow_team(settings, _model())
    result, events = await run_collect(team, "x", plan=make_plan(("a", "poet", [])))
    assert result.status == "failed" and "unknown worker 'poet'" in result.error
    assert not by_type(events, "plan_created")


async def test_a_later_run_on_the_same_thread_plans_again(settings: Any) -> None:
    from .helpers import plan_json

    def fn(messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            return plan_json(("planned", "researcher", []))
        return "ok"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    async with team.runner() as runner:
        await runner.run("x", run_id="one", thread_id="t", plan=make_plan(("a", "researcher", [])))
        second = await runner.run("y", run_id="two", thread_id="t")
    assert second.planner_tier == "llm" and [s.id for s in second.steps] == ["planned"]


async def test_max_parallel_holds_when_finishing_steps_start_their_dependants(
    settings: Any,
) -> None:
    running, peak = 0, 0
    paired = asyncio.Event()  # set once two calls run at once

    async def fn(messages: list[BaseMessage]) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            paired.set()
        async with asyncio.timeout(CEILING_S):
            await paired.wait()  # the first call goes on only once a second one runs with it
        await asyncio.sleep(0.01)  # calls stay open: a third one started now would be counted
        running -= 1
        return "ok"

    team = workflow_team(settings, FunctionChatModel(fn=fn), max_parallel=2)
    plan = make_plan(
        ("a", "researcher", []),
        ("b", "researcher", []),
        ("c", "researcher", []),
        ("d", "writer", ["a"]),
        ("e", "writer", ["a"]),
        ("f", "writer", ["d", "e"]),
    )
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "completed" and peak == 2
    order = [e.step_id for e in by_type(events, "step_started")]
    assert order.index("d") < order.index("f") and order.index("e") < order.index("f")


async def test_fail_fast_starts_nothing_after_the_failure(settings: Any) -> None:
    model = _model(waits={"a": _until_cancelled}, fail={"b"})
    team = workflow_team(settings, model, fail_fast=True)
    plan = make_plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "failed"
    assert "c" not in [e.step_id for e in by_type(events, "step_started")]
    assert result.step("a").status == "skipped" and result.step("c").status == "skipped"
