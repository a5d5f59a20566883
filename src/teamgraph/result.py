"""What a finished (or stopped) run hands back, and where two runs differ (``teamgraph diff``)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, Field

from teamgraph.events import PlannerTier, RunStatus, StepState, TokenUsage
from teamgraph.plan import Plan


class StepResult(BaseModel):
    id: str
    worker: str
    task: str
    status: StepState
    output: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    usage: TokenUsage = Field(default_factory=TokenUsage)


class RunResult(BaseModel):
    """Status, final output, plan and per-step results, shared state, usage and cost of one run."""

    run_id: str
    thread_id: str
    status: RunStatus
    output: str = ""
    error: str = ""
    planner_tier: PlannerTier | None = None
    plan: Plan | None = None
    steps: list[StepResult] = Field(default_factory=list)
    shared_state: dict[str, Any] | None = Field(
        default=None, description="The team's shared state as the run left it (initial_state)."
    )
    usage: TokenUsage = Field(default_factory=TokenUsage)
    usage_by_agent: dict[str, TokenUsage] = Field(default_factory=dict)

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd

    def step(self, step_id: str) -> StepResult:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)


# --- diff ----------------------------------------------------------------------------------------
# Where two runs differ: their plans, steps and outputs (``teamgraph diff RUN_A RUN_B``).


def describe(result: RunResult) -> list[str]:
    """A run as comparable lines: status, plan, every step (state, worker, task, output), the
    answer, and what it cost."""
    lines = [f"status: {result.status}", f"planner tier: {result.planner_tier or '-'}"]
    deps = {s.id: s.depends_on for s in result.plan.steps} if result.plan else {}
    for step in result.steps:
        after = f" after {', '.join(deps[step.id])}" if deps.get(step.id) else ""
        lines.append(f"step {step.id} [{step.status}] {step.worker}{after}: {step.task}")
        lines += [f"  | {line}" for line in (step.output or step.error).splitlines()]
    lines.append("output:")
    lines += [f"  | {line}" for line in result.output.splitlines()]
    usage = result.usage
    lines.append(
        f"usage: {usage.input_tokens} in, {usage.output_tokens} out, ${usage.cost_usd:.6f}"
    )
    return lines


def diff_runs(first: RunResult, second: RunResult) -> str:
    """A unified diff of two runs' descriptions; empty when they agree in everything shown."""
    return "\n".join(
        difflib.unified_diff(
            describe(first),
            describe(second),
            f"run {first.run_id}",
            f"run {second.run_id}",
            lineterm="",
        )
    )
