"""Pausing a graph node for a human: tool approvals and clarifying questions (LangGraph
``interrupt``). A node re-executes from its start on resume; the run's journal replays every model
reply and tool result recorded before the pause, so nothing runs twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from langgraph.types import interrupt

from teamgraph.errors import ApprovalPending
from teamgraph.pauses import ApprovalPause, ClarificationPause, Decision, decision_of
from teamgraph.run_context import RunContext

T = TypeVar("T")
PAUSED: Any = object()


async def with_approvals(ctx: RunContext, body: Callable[[RunContext], Awaitable[T]]) -> T:
    """Run ``body``; while tool calls wait for approval, pause the run with one interrupt that
    lists them all, then run ``body`` again with the decisions."""
    decisions: dict[str, Decision] = {}
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
        answer = interrupt(ApprovalPause(requests=local.pending).model_dump())
        given = dict(answer.get("approvals", {}))
        decisions = {**decisions, **{k: decision_of(v) for k, v in given.items()}}
        for request in local.pending:  # no decision given: a rejection the agent sees
            decisions.setdefault(request.id, Decision.reject("no decision was given"))


def ask_user(question: str) -> str:
    """Pause the run with a clarifying question; returns the user's answer on resume."""
    answer = interrupt(ClarificationPause(question=question).model_dump())
    return str(answer.get("answer", "") if isinstance(answer, dict) else answer)
