"""teamgraph — durable, streamed, cost-tracked teams of AI agents on LangGraph.

The public names below are imported on first use (PEP 562), so ``import teamgraph`` — and
``import teamgraph.errors`` in a tool or a CLI's ``--help`` — does not load LangGraph, LangChain
or SQLAlchemy until a team is built or run.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamgraph.config import Settings
    from teamgraph.errors import (
        AgentFailed,
        ApprovalPending,
        AwaitingHuman,
        BudgetExceeded,
        ControlSignal,
        DatabaseUnavailable,
        LeaseLost,
        MaxIterationsExceeded,
        ModelCallFailed,
        ModelConfigError,
        ModelUnavailable,
        PlanValidationError,
        RunConflict,
        RunFailure,
        RunNotFound,
        RunStop,
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
    from teamgraph.runtime.team_api import Team
    from teamgraph.specs import AgentSpec, TeamSpec, WorkflowOptions

_HOMES = {
    "teamgraph.config": ("Settings",),
    "teamgraph.errors": (
        "AgentFailed",
        "ApprovalPending",
        "AwaitingHuman",
        "BudgetExceeded",
        "ControlSignal",
        "DatabaseUnavailable",
        "LeaseLost",
        "MaxIterationsExceeded",
        "ModelCallFailed",
        "ModelConfigError",
        "ModelUnavailable",
        "PlanValidationError",
        "RunConflict",
        "RunFailure",
        "RunNotFound",
        "RunStop",
        "SandboxUnavailable",
        "SpecError",
        "TeamgraphError",
        "ToolNotFound",
        "TransientModelError",
        "UsageError",
    ),
    "teamgraph.events": ("Event", "TokenUsage"),
    "teamgraph.plan": ("Plan", "Step"),
    "teamgraph.result": ("RunResult", "StepResult"),
    "teamgraph.runtime.runner": ("Runner",),
    "teamgraph.runtime.team_api": ("Team",),
    "teamgraph.specs": ("AgentSpec", "TeamSpec", "WorkflowOptions"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "AgentFailed",
    "AgentSpec",
    "ApprovalPending",
    "AwaitingHuman",
    "BudgetExceeded",
    "ControlSignal",
    "DatabaseUnavailable",
    "Event",
    "LeaseLost",
    "MaxIterationsExceeded",
    "ModelCallFailed",
    "ModelConfigError",
    "ModelUnavailable",
    "Plan",
    "PlanValidationError",
    "RunConflict",
    "RunFailure",
    "RunNotFound",
    "RunResult",
    "RunStop",
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


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'teamgraph' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
