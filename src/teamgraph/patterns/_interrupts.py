"""Pausing a graph node for a human: tool approvals and clarifying questions (LangGraph
``interrupt``). A node re-executes from its start on resume; the run's journal replays every model
reply and tool result recorded before the pause, so nothing runs twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from langgraph.types import interrupt

from teamgraph.errors import ApprovalPending
from teamgraph.run_context import RunContext

T = TypeVar("T")
PAUSED: Any = object()


async def with_approvals(ctx: RunContext, body: Callable[[RunContext], Awaitable[T]]) -> T:
    """Run ``body``; while tool calls wait for approval, pause the run with one interrupt that
    lists them all, then run ``body`` again with the decisions."""
    decisions: dict[str, dict[str, Any]] = {}
    while True:
        local = replace(ctx, decisions=decisions, pending=[])
        try:
            result = await body(local)
        except ApprovalPending:
            result = PAUSED
        if not local.pending:
            if result is PAUSED:
                raise RuntimeError("a tool call paused without a pending approval")
            return result
        answer = interrupt({"type": "approval", "requests": local.pending})
        decisions = {**decisions, **dict(answer.get("approvals", {}))}
        missing = [r["id"] for r in local.pending if r["id"] not in decisions]
        for request_id in missing:  # no decision given: treat as a rejection the agent sees
            decisions[request_id] = {"action": "reject", "comment": "no decision was given"}


def ask_user(question: str) -> str:
    """Pause the run with a clarifying question; returns the user's answer on resume."""
    answer = interrupt({"type": "clarification", "question": question})
    return str(answer.get("answer", "") if isinstance(answer, dict) else answer)
