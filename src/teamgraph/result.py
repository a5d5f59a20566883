"""What a finished (or stopped) run hands back."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from teamgraph.events import RunStatus, TokenUsage


class StepResult(BaseModel):
    id: str
    worker: str
    task: str
    status: str
    output: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    usage: TokenUsage = Field(default_factory=TokenUsage)


class RunResult(BaseModel):
    """Status, final output, per-step results, usage and cost of one run."""

    run_id: str
    thread_id: str
    status: RunStatus
    output: str = ""
    error: str = ""
    planner_tier: str | None = None
    plan: dict[str, Any] | None = None
    steps: list[StepResult] = Field(default_factory=list)
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
