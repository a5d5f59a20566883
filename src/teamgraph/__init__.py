"""teamgraph — durable, streamed, cost-tracked teams of AI agents on LangGraph."""

from teamgraph.config import Settings
from teamgraph.errors import (
    AgentFailed,
    ApprovalPending,
    BudgetExceeded,
    ControlSignal,
    MaxIterationsExceeded,
    ModelConfigError,
    PlanValidationError,
    RunFailure,
    RunNotFound,
    SandboxUnavailable,
    SpecError,
    TeamgraphError,
    ToolNotFound,
    TransientModelError,
    UsageError,
)
from teamgraph.events import Event, TokenUsage
from teamgraph.plan import Plan, Step
from teamgraph.result import RunResult, StepResult
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team import Team
from teamgraph.specs import AgentSpec, TeamSpec, WorkflowOptions

__all__ = [
    "AgentFailed",
    "AgentSpec",
    "ApprovalPending",
    "BudgetExceeded",
    "ControlSignal",
    "Event",
    "MaxIterationsExceeded",
    "ModelConfigError",
    "Plan",
    "PlanValidationError",
    "RunFailure",
    "RunNotFound",
    "RunResult",
    "Runner",
    "SandboxUnavailable",
    "Settings",
    "SpecError",
    "Step",
    "StepResult",
    "Team",
    "TeamSpec",
    "TeamgraphError",
    "TokenUsage",
    "ToolNotFound",
    "TransientModelError",
    "UsageError",
    "WorkflowOptions",
]
