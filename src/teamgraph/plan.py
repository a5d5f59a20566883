"""Plans: what a workflow run will do, the rules a valid plan obeys, reading a plan from a
model's reply, and the dict form graph state and the journal keep it in.

Every caller goes through this module: the planner parses and checks a model's plan here
(:meth:`PlanRules.parse`; a plan that breaks a rule is sent back once with :meth:`PlanRules.errors`
listed), the workflow validates explicit and template plans here (:meth:`PlanRules.check`), and a
plan crosses graph state, the journal and events as :meth:`Plan.to_dict` and comes back with
:meth:`Plan.from_dict`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from teamgraph.errors import PlanValidationError
from teamgraph.events import PlannerTier

_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class Step(BaseModel):
    """One unit of work for one worker."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="Unique within the plan, e.g. 'research_cost'.")
    worker: str = Field(min_length=1, description="Name of the team member that does the step.")
    task: str = Field(min_length=1, description="What the worker is asked to do.")
    depends_on: list[str] = Field(
        default_factory=list, description="Step ids that must finish first."
    )


class Plan(BaseModel):
    """A named set of steps forming a DAG, with the planner's own assessment."""

    model_config = ConfigDict(extra="ignore")

    name: str = "plan"
    reasoning: str = ""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    entities: list[str] = Field(default_factory=list, description="What the request compares.")
    aspects: list[str] = Field(default_factory=list, description="What it compares them on.")
    steps: list[Step] = Field(default_factory=list)

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def to_dict(self) -> dict[str, Any]:
        """The plan as graph state, the journal and events keep it (plain JSON values)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """The plan back from its :meth:`to_dict` form."""
        return cls.model_validate(data)


@dataclass(frozen=True)
class PlanDecision:
    """A run's plan, the planner tier that produced it, and why earlier tiers were passed
    over."""

    plan: Plan
    tier: PlannerTier
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanRules:
    """What a valid plan for one team obeys: its workers are the team's members, it has between
    one and ``max_steps`` steps, its ids are unique and its dependencies exist and form no
    cycle."""

    workers: tuple[str, ...]
    max_steps: int = 10

    def errors(self, plan: Plan) -> list[str]:
        """Every rule ``plan`` breaks, as sentences a person (or the planner model, asked to
        repair it) can act on; empty when the plan is valid."""
        return plan_errors(plan, self.workers, self.max_steps)

    def check(self, plan: Plan) -> Plan:
        """``plan`` unchanged, or :class:`PlanValidationError` listing every problem."""
        return validate_plan(plan, self.workers, self.max_steps)

    def parse(self, text: str) -> tuple[Plan | None, list[str]]:
        """A plan from a model's reply (bare or fenced JSON, text around it ignored), and every
        rule it breaks (or why it is no plan at all)."""
        match = _FENCED.search(text)
        raw = match.group(1) if match else text[text.find("{") : text.rfind("}") + 1]
        try:
            plan = Plan.model_validate(json.loads(raw))
        except json.JSONDecodeError as exc:
            return None, [f"reply is not valid JSON: {exc}"]
        except ValidationError as exc:
            return None, [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        return plan, self.errors(plan)


def plan_errors(plan: Plan, workers: Iterable[str], max_steps: int = 10) -> list[str]:
    """Every rule the plan breaks, as human-readable sentences (empty when the plan is valid)."""
    known = set(workers)
    errors: list[str] = []
    if not 1 <= len(plan.steps) <= max_steps:
        errors.append(f"plan has {len(plan.steps)} steps; it must have between 1 and {max_steps}")
    ids = [s.id for s in plan.steps]
    seen: set[str] = set()
    for step_id in ids:
        if step_id in seen:
            errors.append(f"duplicate step id {step_id!r}")
        seen.add(step_id)
    for step in plan.steps:
        if step.worker not in known:
            errors.append(
                f"step {step.id!r} uses unknown worker {step.worker!r}; "
                f"known workers: {', '.join(sorted(known))}"
            )
        for dep in step.depends_on:
            if dep not in seen:
                errors.append(f"step {step.id!r} depends on unknown step {dep!r}")
            elif dep == step.id:
                errors.append(f"step {step.id!r} depends on itself")
    cycle = find_cycle(plan)
    if cycle:
        errors.append("dependency cycle: " + " -> ".join(cycle))
    return errors


def validate_plan(plan: Plan, workers: Iterable[str], max_steps: int = 10) -> Plan:
    """Return ``plan`` unchanged, or raise :class:`PlanValidationError` listing every problem."""
    errors = plan_errors(plan, workers, max_steps)
    if errors:
        raise PlanValidationError(errors)
    return plan


def find_cycle(plan: Plan) -> list[str]:
    """One dependency cycle as a path ``[a, b, ..., a]``, or ``[]`` if the plan is acyclic."""
    deps = {s.id: [d for d in s.depends_on if d != s.id] for s in plan.steps}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = finished

    def visit(node: str, stack: list[str]) -> list[str]:
        state[node] = 1
        stack.append(node)
        for dep in deps.get(node, []):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep in deps and dep not in state:
                found = visit(dep, stack)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in deps:
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return []


def depth_of(plan: Plan) -> dict[str, int]:
    """Layer of each step: 0 for steps without dependencies, else 1 + deepest dependency."""
    deps = {s.id: s.depends_on for s in plan.steps}
    depth: dict[str, int] = {}

    def level(step_id: str) -> int:
        if step_id not in depth:
            depth[step_id] = 1 + max((level(d) for d in deps.get(step_id, [])), default=-1)
        return depth[step_id]

    for step_id in deps:
        level(step_id)
    return depth
