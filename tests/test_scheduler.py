"""The workflow's schedule: incremental readiness and blocking, in plan order."""

from __future__ import annotations

from teamgraph import Plan, Step
from teamgraph.events import StepState
from teamgraph.patterns._scheduler import Schedule, blocked_steps, ready_steps

from .helpers import make_plan


def _schedule(plan: Plan, **done: StepState) -> Schedule:
    states: dict[str, StepState] = {s.id: "pending" for s in plan.steps}
    return Schedule(plan, states | done)


def _ids(steps: list[Step]) -> list[str]:
    return [s.id for s in steps]


def test_a_step_becomes_ready_when_its_last_dependency_is_done() -> None:
    # not topologically ordered
    plan = make_plan(("c", "w", ["a", "b"]), ("a", "w", []), ("b", "w", []), ("d", "w", ["a"]))
    schedule = _schedule(plan)
    assert _ids(schedule.ready()) == ["a", "b"]
    for step_id in ("a", "b"):
        schedule.set(step_id, "running")
    schedule.set("b", "done")
    assert schedule.ready() == []
    schedule.set("a", "done")
    assert _ids(schedule.ready()) == ["c", "d"]  # plan order, whatever finished first
    assert schedule.ready() == []  # handed out once


def test_ready_respects_the_limit_and_keeps_the_rest() -> None:
    schedule = _schedule(make_plan(("a", "w", []), ("b", "w", []), ("c", "w", [])))
    assert _ids(schedule.ready(2)) == ["a", "b"]
    assert _ids(schedule.ready(2)) == ["c"]


def test_a_step_handed_back_is_ready_again_once() -> None:
    schedule = _schedule(make_plan(("a", "w", []), ("b", "w", [])))
    assert _ids(schedule.ready(1)) == ["a"]
    schedule.set("a", "running")
    schedule.set("a", "pending")  # e.g. the budget refused its model call
    assert _ids(schedule.ready()) == ["a", "b"]


def test_blocked_steps_cascade_with_the_first_failed_dependency_as_reason() -> None:
    plan = make_plan(
        ("a", "w", []), ("b", "w", []), ("c", "w", ["b", "a"]), ("d", "w", ["c"]), ("e", "w", ["b"])
    )
    schedule = _schedule(plan)
    schedule.set("a", "failed")
    assert schedule.failed and schedule.first_failed() == "a"
    assert schedule.blocked() == {"c": "dependency 'a' failed"}
    schedule.set("c", "skipped")
    assert schedule.blocked() == {"d": "dependency 'c' was skipped"}
    schedule.set("d", "skipped")
    assert schedule.blocked() == {}
    schedule.set("b", "done")
    assert _ids(schedule.ready()) == ["e"]
    assert _ids(schedule.unfinished()) == ["e"]


def test_a_resumed_schedule_starts_from_the_saved_states() -> None:
    plan = make_plan(("a", "w", []), ("b", "w", ["a"]), ("c", "w", ["x"]), ("x", "w", []))
    schedule = _schedule(plan, a="done", x="failed")
    assert _ids(schedule.ready()) == ["b"]
    assert schedule.blocked() == {"c": "dependency 'x' failed"}


def test_the_pure_helpers_agree() -> None:
    plan = make_plan(("a", "w", []), ("b", "w", ["a"]), ("c", "w", ["a"]), ("d", "w", []))
    states: dict[str, StepState] = {"a": "skipped", "b": "pending", "c": "done", "d": "pending"}
    assert _ids(ready_steps(plan, states)) == ["d"]
    assert blocked_steps(plan, states) == {"b": "dependency 'a' was skipped"}
    assert states["b"] == "pending"  # the helpers never change the caller's states
