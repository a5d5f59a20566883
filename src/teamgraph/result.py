"""What a finished (or stopped) run hands back."""

from __future__ import annotations

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
