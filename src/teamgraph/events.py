"""The event vocabulary: everything a run does, as one typed stream.

CLI, server (SSE), UI, persistence and tests all consume these. Every event carries ``run_id``, a
per-run monotonically increasing ``seq`` (the SSE id used for replay), a timestamp, and ``path`` —
team → nested team → agent — so one stream describes a whole tree of teams. Names are stable: add
fields or types, never rename.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from teamgraph.status import RunStatus as RunStatus  # re-exported: events carry them
from teamgraph.status import StepState as StepState

PlannerTier = Literal["explicit", "template", "llm", "cache", "rules", "fallback"]


def _now() -> datetime:
    return datetime.now(UTC)


class TokenUsage(BaseModel):
    """Tokens and US dollars spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class BaseEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    seq: int = 0
    ts: datetime = Field(default_factory=_now)
    path: list[str] = Field(default_factory=list, description="team → nested team → agent")
    parent_id: str | None = Field(default=None, description="run id of the parent run, if nested")

    @cached_property
    def encoded(self) -> str:
        """The event as JSON, made once: a live event is both stored and streamed."""
        return self.model_dump_json()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("encoded", None)  # the copy's own JSON, not this event's
        return copied


class RunStarted(BaseEvent):
    type: Literal["run_started"] = "run_started"
    team: str
    pattern: str
    input: str
    thread_id: str


class PlanCreated(BaseEvent):
    type: Literal["plan_created"] = "plan_created"
    plan_name: str
    tier: PlannerTier
    confidence: float
    reasoning: str = ""
    steps: list[dict[str, Any]]
    notes: list[str] = Field(default_factory=list, description="why earlier tiers were passed over")


class StepStarted(BaseEvent):
    type: Literal["step_started"] = "step_started"
    step_id: str
    worker: str
    task: str


class StepCompleted(BaseEvent):
    type: Literal["step_completed"] = "step_completed"
    step_id: str
    worker: str
    output: str
    elapsed_s: float
    usage: TokenUsage = Field(default_factory=TokenUsage)


class StepFailed(BaseEvent):
    type: Literal["step_failed"] = "step_failed"
    step_id: str
    worker: str
    error: str
    elapsed_s: float = 0.0


class StepSkipped(BaseEvent):
    type: Literal["step_skipped"] = "step_skipped"
    step_id: str
    worker: str
    reason: str


STEP_OUTCOME_EVENTS = (StepCompleted, StepFailed, StepSkipped)
STEP_OUTCOMES = tuple(cls.model_fields["type"].default for cls in STEP_OUTCOME_EVENTS)


class AgentStarted(BaseEvent):
    type: Literal["agent_started"] = "agent_started"
    agent: str
    step_id: str | None = None


class TokenDelta(BaseEvent):
    type: Literal["token"] = "token"
    agent: str
    text: str
    step_id: str | None = None


class ModelRetry(BaseEvent):
    """A model call failed transiently and is asked again after ``delay_s``: the tokens this
    agent streamed since its last ``usage`` event were from the failed attempt."""

    type: Literal["model_retry"] = "model_retry"
    agent: str
    model: str
    attempt: int  # the attempt that failed (1 = the first)
    delay_s: float
    error: str
    step_id: str | None = None


class AgentMessage(BaseEvent):
    type: Literal["agent_message"] = "agent_message"
    agent: str
    content: str
    step_id: str | None = None


class ToolCalled(BaseEvent):
    type: Literal["tool_called"] = "tool_called"
    agent: str
    tool: str
    call_id: str
    args: dict[str, Any]
    step_id: str | None = None


class ToolReturned(BaseEvent):
    type: Literal["tool_returned"] = "tool_returned"
    agent: str
    tool: str
    call_id: str
    output: str
    is_error: bool = False
    step_id: str | None = None


class Handoff(BaseEvent):
    type: Literal["handoff"] = "handoff"
    from_agent: str
    to_agent: str
    reason: str = ""


class ClarificationRequested(BaseEvent):
    type: Literal["clarification_requested"] = "clarification_requested"
    question: str


class ApprovalRequested(BaseEvent):
    type: Literal["approval_requested"] = "approval_requested"
    agent: str
    tool: str
    call_id: str
    args: dict[str, Any]
    request_id: str = Field(default="", description="What a decision refers to on resume.")
    step_id: str | None = None


class Resumed(BaseEvent):
    """A run continues: what earlier executions finished, and (workflows) the plan they work
    to, so a consumer that starts following here knows it. Work announced before is not
    announced again."""

    type: Literal["resumed"] = "resumed"
    completed_steps: list[str] = Field(default_factory=list)
    plan_name: str | None = None
    tier: PlannerTier | None = None
    confidence: float | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list, description="The plan's steps.")


class UsageRecorded(BaseEvent):
    """One model call's cost, and why the model stopped (``length``: cut by the output limit;
    see :func:`teamgraph.llm.call.stop_reason`)."""

    type: Literal["usage"] = "usage"
    agent: str
    model: str
    usage: TokenUsage
    stop_reason: str = ""
    step_id: str | None = None


class RunCompleted(BaseEvent):
    type: Literal["run_completed"] = "run_completed"
    status: RunStatus
    output: str
    usage: TokenUsage
    shared_state: dict[str, Any] | None = Field(
        default=None, description="The team's shared state as the run left it, if it has one."
    )


class RunFailed(BaseEvent):
    type: Literal["run_failed"] = "run_failed"
    error: str


class RunCancelled(BaseEvent):
    type: Literal["run_cancelled"] = "run_cancelled"
    reason: str = ""


Event = Annotated[
    RunStarted
    | PlanCreated
    | StepStarted
    | StepCompleted
    | StepFailed
    | StepSkipped
    | AgentStarted
    | TokenDelta
    | ModelRetry
    | AgentMessage
    | ToolCalled
    | ToolReturned
    | Handoff
    | ClarificationRequested
    | ApprovalRequested
    | Resumed
    | UsageRecorded
    | RunCompleted
    | RunFailed
    | RunCancelled,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from_json(data: str | bytes) -> Event:
    """Parse one event serialised with ``event.model_dump_json()``; its :attr:`encoded` is that
    JSON text, as read (a stored or relayed event is streamed without being serialised again)."""
    event = EVENT_ADAPTER.validate_json(data)
    event.__dict__["encoded"] = data if isinstance(data, str) else data.decode()
    return event
