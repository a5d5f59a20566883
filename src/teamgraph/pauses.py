"""What a paused run waits for, and a human's reply — one typed vocabulary for the graph's
interrupts, the runtime, the CLI and the HTTP API.

A run pauses with one of two interrupt payloads: a :class:`ClarificationPause` (a question) or an
:class:`ApprovalPause` (sensitive tool calls, each an :class:`ApprovalRequest`). It resumes with
an answer, or a :class:`Decision` per request. Payloads cross LangGraph's interrupt as plain JSON
(``model_dump``) and are read back with :func:`pause_of`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

Action = Literal["approve", "reject", "edit"]


class Decision(BaseModel):
    """A human's decision on one tool call: run it, refuse it (the agent sees ``comment``), or
    run it with other arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action
    comment: str = Field(default="", max_length=2000, description="Shown to the agent.")
    args: dict[str, Any] | None = Field(default=None, description="The new arguments (edit).")

    @model_validator(mode="after")
    def _edit_needs_arguments(self) -> Decision:
        if self.action == "edit" and self.args is None:
            raise ValueError("an edit decision needs the new arguments in args")
        return self

    @classmethod
    def approve(cls) -> Decision:
        return cls(action="approve")

    @classmethod
    def reject(cls, comment: str = "") -> Decision:
        return cls(action="reject", comment=comment)

    @classmethod
    def edit(cls, args: dict[str, Any]) -> Decision:
        return cls(action="edit", args=args)


class ApprovalRequest(BaseModel):
    """A sensitive tool call waiting for a decision. ``id`` is what the decision refers to."""

    id: str
    agent: str
    tool: str
    args: dict[str, Any]
    call_id: str
    step_id: str | None = None
    args_schema: dict[str, Any] | None = Field(
        default=None, description="JSON schema of the tool's arguments: an edit must match it."
    )

    def edit_errors(self, args: dict[str, Any]) -> str:
        """Why ``args`` cannot replace this call's arguments (empty when they can)."""
        if self.args_schema is None:
            return ""
        from jsonschema import Draft202012Validator  # imported when an edit is checked

        try:  # an error's message shows its value: a deeply nested one cannot be shown
            errors = list(Draft202012Validator(self.args_schema).iter_errors(args))
            found = sorted(
                f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: {e.message}" for e in errors
            )
        except RecursionError:
            return "arguments: nested too deep to check against the tool's schema"
        return "; ".join(found)


class ApprovalPause(BaseModel):
    type: Literal["approval"] = "approval"
    requests: list[ApprovalRequest]


class ClarificationPause(BaseModel):
    type: Literal["clarification"] = "clarification"
    question: str
    asked: list[str] = Field(
        default_factory=list,
        description="The nested teams' questions this one relays (by key): its reply answers "
        "them all and names them again.",
    )


Pause = Annotated[ApprovalPause | ClarificationPause, Field(discriminator="type")]
_PAUSE: TypeAdapter[ApprovalPause | ClarificationPause] = TypeAdapter(Pause)


def pause_of(value: Any) -> ApprovalPause | ClarificationPause:
    """An interrupt's payload, typed."""
    return _PAUSE.validate_python(value)


def decision_of(value: Decision | dict[str, Any]) -> Decision:
    """A decision, from its typed form or its JSON form (``{"action": ..., ...}``)."""
    return value if isinstance(value, Decision) else Decision.model_validate(value)
