"""Deciding what runs next in a workflow (pure; the executor does the running)."""

from __future__ import annotations

from teamgraph.events import StepState
from teamgraph.plan import Plan, Step


def ready_steps(plan: Plan, states: dict[str, StepState]) -> list[Step]:
    """Pending steps whose own dependencies are all done, in plan order."""
    return [
        s
        for s in plan.steps
        if states[s.id] == "pending" and all(states[d] == "done" for d in s.depends_on)
    ]


def blocked_steps(plan: Plan, states: dict[str, StepState]) -> dict[str, str]:
    """Pending steps that can never run, with the reason (a dependency failed or was skipped)."""
    blocked: dict[str, str] = {}
    for step in plan.steps:
        if states[step.id] != "pending":
            continue
        for dep in step.depends_on:
            if states[dep] in ("failed", "skipped"):
                verb = "failed" if states[dep] == "failed" else "was skipped"
                blocked[step.id] = f"dependency {dep!r} {verb}"
                break
    return blocked
