"""A paused run: what it waits for, and turning a human's reply into LangGraph's resume command."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Command, Interrupt

from teamgraph.errors import UsageError
from teamgraph.events import ApprovalRequested, ClarificationRequested
from teamgraph.pauses import (
    ApprovalPause,
    ApprovalRequest,
    ClarificationPause,
    Decision,
    decision_of,
    pause_of,
)
from teamgraph.run_context import RunContext

DecisionLike = Decision | dict[str, Any]  # typed, or its JSON form {"action": ..., ...}


def pending_requests(interrupts: Sequence[Interrupt]) -> list[dict[str, Any]]:
    """Flat list of what the run waits for, as JSON: clarifying questions and tool approvals."""
    out: list[dict[str, Any]] = []
    for item in interrupts:
        pause = pause_of(item.value)
        if isinstance(pause, ClarificationPause):
            out.append(
                {"type": "clarification", "interrupt_id": item.id, "question": pause.question}
            )
        else:
            out.extend(
                {"type": "approval", "interrupt_id": item.id, **request.model_dump()}
                for request in pause.requests
            )
    return out


def emit_pauses(ctx: RunContext, requests: list[dict[str, Any]]) -> None:
    for r in requests:
        if r["type"] == "clarification":
            ctx.emit(ClarificationRequested, question=r["question"])
        else:
            ctx.emit(
                ApprovalRequested,
                r["agent"],
                agent=r["agent"],
                tool=r["tool"],
                call_id=r["call_id"],
                args=r["args"],
                request_id=r["id"],
                step_id=r.get("step_id"),
            )


def resume_command(
    interrupts: Sequence[Interrupt],
    answer: str | None = None,
    decisions: Mapping[str, DecisionLike] | None = None,
    default: DecisionLike | None = None,
) -> Command[Any]:
    """``Command(resume={interrupt id: value})`` for every pending interrupt; a missing answer or
    decision is a :class:`UsageError` that says what the run waits for."""
    values: dict[str, Any] = {}
    for item in interrupts:
        pause = pause_of(item.value)
        if isinstance(pause, ClarificationPause):
            if answer is None:
                raise UsageError(f"the run waits for an answer to: {pause.question}")
            values[item.id] = {"answer": answer, "asked": pause.asked}
        else:
            chosen = _decide(pause, decisions or {}, default)
            values[item.id] = {"approvals": {k: d.model_dump() for k, d in chosen.items()}}
    return Command(resume=values)


def _decide(
    pause: ApprovalPause, decisions: Mapping[str, DecisionLike], default: DecisionLike | None
) -> dict[str, Decision]:
    chosen: dict[str, Decision] = {}
    for request in pause.requests:
        decision = decisions.get(request.id) or default
        if decision is None:
            raise UsageError(f"the run waits for a decision on {_call(request)} [{request.id}]")
        try:
            chosen[request.id] = decision_of(decision)
        except ValueError as exc:
            raise UsageError(f"decision on {_call(request)}: {exc}") from None
        edited = chosen[request.id]
        wrong = request.edit_errors(edited.args or {}) if edited.action == "edit" else ""
        if wrong:
            raise UsageError(f"the edit of {_call(request)} does not fit {request.tool}: {wrong}")
    return chosen


def _call(request: ApprovalRequest) -> str:
    return f"{request.tool}({json.dumps(request.args)})"
