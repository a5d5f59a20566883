"""Request and response bodies (pydantic, documented in the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    ValidationInfo,
    field_validator,
)

from teamgraph.events import TokenUsage
from teamgraph.pauses import Decision
from teamgraph.result import StepResult
from teamgraph.server.security import password_problems


def no_nul(value: str) -> str:
    """PostgreSQL cannot store NUL characters in text: refuse them at the edge."""
    if "\x00" in value:
        raise ValueError("must not contain NUL bytes")
    return value


SafeText = Annotated[str, AfterValidator(no_nul)]


class Credentials(BaseModel):
    email: EmailStr
    password: str = Field(min_length=1, max_length=200)

    @field_validator("password")
    @classmethod
    def _strong(cls, value: str) -> str:
        problems = password_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class Token(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: datetime


class UserOut(BaseModel):
    id: str
    email: str
    token: Token


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: SafeText = Field(default="", max_length=200)
    team: SafeText | None = Field(
        default=None, description="Team name (default: the first served)."
    )
    template: SafeText | None = Field(default=None, max_length=200)


class SessionOut(BaseModel):
    session_id: str
    name: str
    team: str
    template: str | None = None
    token: Token | None = Field(default=None, description="A session token for the chat routes.")
    created_at: datetime | None = None


class SessionRename(BaseModel):
    name: SafeText = Field(min_length=1, max_length=200)


class TeamOut(BaseModel):
    name: str
    description: str
    pattern: str
    members: list[dict[str, Any]]
    budget: dict[str, float | int] | None = Field(
        default=None, description="The team's per-run limits (max_tokens, max_usd, ...), if any."
    )


class MessageOut(BaseModel):
    role: str
    content: str
    run_id: str | None = Field(default=None, description="The run the message belongs to.")
    created_at: datetime


class TemplateOut(BaseModel):
    name: str
    description: str


MAX_USER_CHARS = 3000
MAX_HISTORY_CHARS = 200_000  # one message of a re-sent history (the body limit bounds the rest)


class ChatMessage(BaseModel):
    """A chat message as the seeds' clients send it. What the user writes is 1–3000 characters,
    with no script tag and no NUL; the assistant's and system's messages a client sends back
    with the history are taken as they are (an answer may be long, or show code)."""

    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_HISTORY_CHARS)

    @field_validator("content")
    @classmethod
    def _user_text(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("role") != "user":
            return value
        if not value:
            raise ValueError("String should have at least 1 character")
        if len(value) > MAX_USER_CHARS:
            raise ValueError(f"String should have at most {MAX_USER_CHARS} characters")
        if "<script" in value.lower():
            raise ValueError("content must not contain script tags")
        if "\x00" in value:
            raise ValueError("content must not contain NUL bytes")
        return value


class ChatRequest(BaseModel):
    messages: list[ChatMessage] = Field(min_length=1)


class ChatResponse(BaseModel):
    messages: list[ChatMessage]


class StreamChunk(BaseModel):
    content: str
    done: bool


# --- runs ---------------------------------------------------------------------------------------


class RunOptions(BaseModel):
    """Reserved for per-run options: none are defined yet, unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: SafeText = Field(min_length=1, max_length=20000, description="What the team should do.")
    template: SafeText | None = Field(
        default=None, max_length=200, description="Workflow template (default: the session's)."
    )
    options: RunOptions = Field(default_factory=RunOptions)

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be blank")
        return value


class RunAccepted(BaseModel):
    run_id: str
    status: str = Field(description="The run's status when the answer was sent.")


class RunDecision(Decision):
    """A decision on one tool call (``edit`` needs ``args``)."""

    comment: SafeText = Field(default="", max_length=2000, description="Shown to the agent.")


class RunResume(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: SafeText | None = Field(
        default=None, min_length=1, max_length=20000, description="Answer to the run's question."
    )
    decisions: dict[str, RunDecision] = Field(
        default_factory=dict, description="Decisions on tool calls, by approval request_id."
    )
    default: RunDecision | None = Field(
        default=None, description="The decision on every tool call without one in decisions."
    )


class RunSummary(BaseModel):
    run_id: str
    session_id: str | None
    team: str
    pattern: str
    status: str
    input: str
    template: str | None
    planner_tier: str | None
    error: str | None
    cost_usd: float
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class RunOut(RunSummary):
    thread_id: str
    output: str | None
    plan: dict[str, Any] | None = None
    steps: list[StepResult] = Field(default_factory=list)
    usage: TokenUsage
    usage_by_agent: dict[str, TokenUsage] = Field(default_factory=dict)


class PendingItem(BaseModel):
    """What a paused run waits for: an answer to a question, or a decision on a tool call."""

    run_id: str
    session_id: str | None
    type: Literal["clarification", "approval"]
    interrupt_id: str
    question: str | None = None
    request_id: str | None = Field(default=None, description="The key of its decision on resume.")
    agent: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    call_id: str | None = None
    step_id: str | None = None
