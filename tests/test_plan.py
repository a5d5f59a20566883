from __future__ import annotations

import pytest

from teamgraph import Plan, PlanValidationError, Step
from teamgraph.plan import depth_of, plan_errors, validate_plan

from .helpers import make_plan

WORKERS = ["researcher", "writer"]


def test_valid_plan_passes() -> None:
    plan = make_plan(("a", "researcher", []), ("b", "writer", ["a"]))
    assert validate_plan(plan, WORKERS) is plan
    assert depth_of(plan) == {"a": 0, "b": 1}


def test_cycle_is_reported_as_a_path() -> None:
    plan = make_plan(("a", "researcher", ["c"]), ("b", "writer", ["a"]), ("c", "writer", ["b"]))
    errors = plan_errors(plan, WORKERS)
    assert any(e.startswith("dependency cycle: ") and "a" in e and "->" in e for e in errors)


def test_unknown_dependency() -> None:
    errors = plan_errors(make_plan(("a", "researcher", ["ghost"])), WORKERS)
    assert errors == ["step 'a' depends on unknown step 'ghost'"]


def test_duplicate_id() -> None:
    errors = plan_errors(make_plan(("a", "researcher", []), ("a", "writer", [])), WORKERS)
    assert "duplicate step id 'a'" in errors


def test_unknown_worker_lists_known_ones() -> None:
    errors = plan_errors(make_plan(("a", "poet", [])), WORKERS)
    assert errors == ["step 'a' uses unknown worker 'poet'; known workers: researcher, writer"]


def test_step_count_bounds() -> None:
    assert "between 1 and 10" in plan_errors(Plan(steps=[]), WORKERS)[0]
    many = Plan(steps=[Step(id=f"s{i}", worker="writer", task="t") for i in range(3)])
    assert "between 1 and 2" in plan_errors(many, WORKERS, max_steps=2)[0]


def test_validate_raises_with_every_error() -> None:
    plan = make_plan(("a", "poet", ["ghost"]), ("a", "writer", []))
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan, WORKERS)
    assert len(info.value.errors) == 3
