from __future__ import annotations

import json

import pytest

from teamgraph import Plan, PlanValidationError, Step
from teamgraph.plan import PlanRules, depth_of, plan_errors, validate_plan

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


RULES = PlanRules(tuple(WORKERS), max_steps=3)
REPLY = '{"name": "n", "steps": [{"id": "a", "worker": "writer", "task": "write"}]}'


@pytest.mark.parametrize(
    "text",
    [REPLY, f"Here is the plan:\n```json\n{REPLY}\n```\nDone.", f"Sure! {REPLY} Hope it helps."],
)
def test_a_models_plan_is_read_bare_fenced_or_with_text_around(text: str) -> None:
    plan, errors = RULES.parse(text)
    assert errors == [] and plan is not None
    assert [(s.id, s.worker, s.task) for s in plan.steps] == [("a", "writer", "write")]


def test_a_reply_that_is_no_plan_says_why() -> None:
    plan, errors = RULES.parse("no plan today")
    assert plan is None and len(errors) == 1 and errors[0].startswith("reply is not valid JSON")
    plan, errors = RULES.parse('{"steps": [{"id": "a", "worker": "writer"}]}')
    assert plan is None and errors == ["steps.0.task: Field required"]


def test_a_parsed_plan_that_breaks_a_rule_comes_with_every_broken_rule() -> None:
    plan, errors = RULES.parse('{"steps": [{"id": "a", "worker": "poet", "task": "t"}]}')
    assert plan is not None
    assert errors == ["step 'a' uses unknown worker 'poet'; known workers: researcher, writer"]
    with pytest.raises(PlanValidationError):
        RULES.check(plan)


def test_the_dict_form_holds_the_whole_plan() -> None:
    plan = Plan(
        name="n",
        reasoning="r",
        confidence=0.5,
        entities=["x", "y"],
        aspects=["cost"],
        steps=[
            Step(id="a", worker="writer", task="t"),
            Step(id="b", worker="w", task="u", depends_on=["a"]),
        ],
    )
    data = plan.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON values: state, journal, events
    assert Plan.from_dict(data) == plan
