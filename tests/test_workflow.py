from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from teamgraph import Plan, Step
from teamgraph.durable import StepRecord
from teamgraph.patterns.synthesis import NO_RESULTS, concat_report
from teamgraph.runtime.team import Team
from teamgraph.testing import FunctionChatModel, transient

from .helpers import by_type, is_planner, run_collect, task_of, team_dict


def _plan(*steps: tuple[str, str, list[str]]) -> Plan:
    return Plan(
        name="p",
        steps=[Step(id=i, worker=w, task=f"task {i}", depends_on=d) for i, w, d in steps],
    )


def _latency_model(latency: dict[str, float], fail: set[str] = frozenset()) -> FunctionChatModel:  # type: ignore[assignment]
    async def fn(messages: list[BaseMessage]) -> str:
        step = task_of(messages).removeprefix("task ")
        await asyncio.sleep(latency.get(step, 0))
        if step in fail:
            raise ValueError(f"{step} exploded")
        return f"output of {step}"

    return FunctionChatModel(fn=fn)


def _order(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.type, e.step_id) for e in events if e.type.startswith("step_")]


async def test_a_step_starts_as_soon_as_its_own_dependencies_are_done(settings: Any) -> None:
    model = _latency_model({"a": 0.05, "b": 0.6, "c": 0.05})
    team = Team.from_dict(team_dict(), settings=settings, model=model)
    plan = _plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
    result, events = await run_collect(team, "x", plan=plan)
    order = _order(events)
    assert order.index(("step_started", "c")) < order.index(("step_completed", "b"))
    assert result.status == "completed" and result.planner_tier == "explicit"


async def test_context_holds_only_the_steps_own_dependencies(settings: Any) -> None:
    model = _latency_model({})
    team = Team.from_dict(team_dict(), settings=settings, model=model)
    plan = _plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
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
    team = Team.from_dict(team_dict(context_token_budget=100), settings=settings, model=model)
    await run_collect(team, "x", plan=_plan(("a", "researcher", []), ("c", "writer", ["a"])))
    prompt = str(model.calls[-1][-1].content)
    context = prompt.split("### a\n")[1]
    assert context.endswith("…[trimmed]") and len(context) <= 100 * 4


async def test_a_failing_step_never_cancels_a_running_sibling(settings: Any) -> None:
    model = _latency_model({"a": 0.02, "b": 0.3}, fail={"a"})
    team = Team.from_dict(team_dict(), settings=settings, model=model)
    plan = _plan(
        ("a", "researcher", []),
        ("b", "researcher", []),
        ("c", "writer", ["a"]),
        ("d", "writer", ["c"]),
        ("e", "writer", ["b"]),
    )
    result, events = await run_collect(team, "x", plan=plan)
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
    model = _latency_model({"a": 0.02, "b": 5.0}, fail={"a"})
    team = Team.from_dict(team_dict(fail_fast=True), settings=settings, model=model)
    result, _ = await run_collect(
        team, "x", plan=_plan(("a", "researcher", []), ("b", "researcher", []))
    )
    assert result.status == "failed"
    assert result.step("b").status == "skipped" and "fail_fast" in result.step("b").error


async def test_unknown_worker_fails_only_that_step(settings: Any) -> None:
    from teamgraph.patterns._steps import run_step

    team = Team.from_dict(team_dict(), settings=settings, model=_latency_model({}))
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

    team = Team.from_dict(team_dict(), settings=settings, model=FunctionChatModel(fn=raising))
    result, _ = await run_collect(
        team, "x", plan=_plan(("flaky", "researcher", []), ("broken", "researcher", []))
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

    team = Team.from_dict(team_dict(), settings=settings, model=FunctionChatModel(fn=fn))
    result, _ = await run_collect(team, "x", plan=_plan(("a", "researcher", [])))
    assert calls == 3 and result.status == "failed"  # stopped, not "completed_with_errors"
    assert "still failing after 3 attempts" in result.error and "429" in result.error
    assert "resume" in result.error
    down = False
    resumed = await team.resume(result.run_id)
    assert resumed.status == "completed" and resumed.step("a").output == "fine"


def test_concat_report_format() -> None:
    plan = _plan(("a", "researcher", []), ("b", "writer", ["a"]))
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
    def fn(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        if system.startswith("You are the synthesizer"):
            assert "### a (researcher)\noutput of a" in str(messages[-1].content)
            return "FINAL ANSWER"
        return "output of a"

    team = Team.from_dict(
        team_dict(synthesizer="llm"), settings=settings, model=FunctionChatModel(fn=fn)
    )
    result, _ = await run_collect(team, "x", plan=_plan(("a", "researcher", [])))
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
    team = Team.from_dict(team_dict(), settings=settings, model=model)
    result, events = await run_collect(team, "write something")
    per_call = (1000 * 0.15 + 500 * 0.60) / 1e6
    assert result.usage.input_tokens == 3000 and result.usage.output_tokens == 1500
    assert result.usage.cost_usd == pytest.approx(3 * per_call)
    assert set(result.usage_by_agent) == {"planner", "researcher", "writer"}
    assert result.step("a").usage.total_tokens == 1500
    assert len(by_type(events, "usage")) == 3
    assert by_type(events, "run_completed")[0].usage.cost_usd == pytest.approx(3 * per_call)


async def test_a_new_request_in_the_same_thread_plans_afresh(settings: Any) -> None:
    model = _latency_model({})
    team = Team.from_dict(team_dict(), settings=settings, model=model)
    first, _ = await run_collect(
        team, "one", plan=_plan(("a", "researcher", [])), thread_id="T", run_id="r1"
    )
    plan2 = Plan(name="p2", steps=[Step(id="a", worker="writer", task="task again")])
    second, events = await run_collect(team, "two", plan=plan2, thread_id="T", run_id="r2")
    assert first.step("a").output == "output of a"
    assert second.step("a").output == "output of again"
    assert ("step_started", "a") in _order(events)


def _null_emitter() -> Any:
    from teamgraph.run_context import Emitter

    return Emitter("r", lambda event: None)


async def test_an_explicit_plan_goes_straight_to_execute(settings: Any) -> None:
    team = Team.from_dict(team_dict(), settings=settings, model=_latency_model({}))
    plan = _plan(("a", "researcher", []), ("b", "writer", ["a"]))
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
    team = Team.from_dict(team_dict(), settings=settings, model=_latency_model({}))
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
    spec = {**team_dict(), "members": ["researcher", "writer"]}  # the template needs an analyst
    team = Team.from_dict(spec, settings=settings, model=_latency_model({}))
    result, events = await run_collect(team, "x", template="research_report")
    plan = by_type(events, "plan_created")[0]
    assert result.status == "completed" and plan.tier != "template"
    assert any("'research_report' does not fit this team" in note for note in plan.notes)


async def test_an_invalid_explicit_plan_fails_the_run_with_its_problems(settings: Any) -> None:
    team = Team.from_dict(team_dict(), settings=settings, model=_latency_model({}))
    result, events = await run_collect(team, "x", plan=_plan(("a", "poet", [])))
    assert result.status == "failed" and "unknown worker 'poet'" in result.error
    assert not by_type(events, "plan_created")


async def test_a_later_run_on_the_same_thread_plans_again(settings: Any) -> None:
    from .helpers import plan_json

    def fn(messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            return plan_json(("planned", "researcher", []))
        return "ok"

    team = Team.from_dict(team_dict(), settings=settings, model=FunctionChatModel(fn=fn))
    async with team.runner() as runner:
        await runner.run("x", run_id="one", thread_id="t", plan=_plan(("a", "researcher", [])))
        second = await runner.run("y", run_id="two", thread_id="t")
    assert second.planner_tier == "llm" and [s.id for s in second.steps] == ["planned"]


async def test_max_parallel_holds_when_finishing_steps_start_their_dependants(
    settings: Any,
) -> None:
    running, peak = 0, 0

    async def fn(messages: list[BaseMessage]) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    team = Team.from_dict(
        team_dict(max_parallel=2), settings=settings, model=FunctionChatModel(fn=fn)
    )
    plan = _plan(
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
    model = _latency_model({"a": 0.05, "b": 0.01}, fail={"b"})
    team = Team.from_dict(team_dict(fail_fast=True), settings=settings, model=model)
    plan = _plan(("a", "researcher", []), ("b", "researcher", []), ("c", "writer", ["a"]))
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "failed"
    assert "c" not in [e.step_id for e in by_type(events, "step_started")]
    assert result.step("a").status == "skipped" and result.step("c").status == "skipped"
