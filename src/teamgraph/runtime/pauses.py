"""A paused run: what it waits for, and turning a human's reply into LangGraph's resume command."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Command, Interrupt

from teamgraph.errors import UsageError
from teamgraph.events import ApprovalRequested, ClarificationRequested
from teamgraph.run_context import RunContext

Decision = dict[str, Any]  # {"action": "approve" | "reject" | "edit", "comment"?, "args"?}


def pending_requests(interrupts: Sequence[Interrupt]) -> list[dict[str, Any]]:
    """Flat list of what the run waits for: clarifying questions and tool approvals."""
    out: list[dict[str, Any]] = []
    for item in interrupts:
        value = dict(item.value)
        if value.get("type") == "clarification":
            out.append(
                {"type": "clarification", "interrupt_id": item.id, "question": value["question"]}
            )
        else:
            out.extend(
                {"type": "approval", "interrupt_id": item.id, **request}
                for request in value.get("requests", [])
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
    decisions: Mapping[str, Decision] | None = None,
    default: Decision | None = None,
) -> Command[Any]:
    """``Command(resume={interrupt id: value})`` for every pending interrupt; a missing answer or
    decision is a :class:`UsageError` that says what the run waits for."""
    values: dict[str, Any] = {}
    for item in interrupts:
        value = dict(item.value)
        if value.get("type") == "clarification":
            if answer is None:
                raise UsageError(f"the run waits for an answer to: {value['question']}")
            values[item.id] = {"answer": answer}
        else:
            values[item.id] = {"approvals": _decide(value["requests"], decisions or {}, default)}
    return Command(resume=values)


def _decide(
    requests: list[dict[str, Any]], decisions: Mapping[str, Decision], default: Decision | None
) -> dict[str, Decision]:
    chosen: dict[str, Decision] = {}
    for request in requests:
        decision = decisions.get(request["id"]) or default
        if decision is None:
            call = f"{request['tool']}({json.dumps(request['args'])})"
            raise UsageError(f"the run waits for a decision on {call} [{request['id']}]")
        if decision.get("action") not in ("approve", "reject", "edit"):
            raise UsageError(f"decision action must be approve, reject or edit: {decision!r}")
        chosen[request["id"]] = decision
    return chosen
