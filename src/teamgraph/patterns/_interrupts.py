"""Pausing a graph node for a human: tool approvals and clarifying questions (LangGraph
``interrupt``), the node's own and those of the nested teams it runs. A node re-executes from its
start on resume; the run's journal replays every model reply and tool result recorded before the
pause, so nothing runs twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from langgraph.types import Interrupt, interrupt

from teamgraph.errors import AwaitingHuman
from teamgraph.pauses import ApprovalPause, ClarificationPause, Decision, decision_of, pause_of
from teamgraph.run_context import RunContext

T = TypeVar("T")
PAUSED: Any = object()


async def with_pauses(ctx: RunContext, body: Callable[[RunContext], Awaitable[T]]) -> T:
    """Run ``body``; while it waits for humans (tool calls to approve, nested teams' questions
    or approvals), pause the run with one interrupt — the questions first, then the approvals —
    and run ``body`` again with every reply given so far.

    Replies are pooled by what they answer (a decision by its request id, an answer by the
    questions it was given for), not by the pass that asked: a nested team keeps its progress
    on its own thread, so a node re-executed after a later pause can find it waiting for what a
    later pass asked, and must still hand it the right reply."""
    decisions: dict[str, Decision] = {}
    answers: dict[str, str] = {}
    while True:
        local = replace(ctx, decisions=decisions, answers=answers, pending=[], questions=[])
        try:
            result = await body(local)
        except AwaitingHuman:
            result = PAUSED
        if not local.pending and not local.questions:
            if result is PAUSED:
                raise RuntimeError("a tool call paused without a pending approval")
            return result
        reply = interrupt(_pause(local).model_dump())
        decisions, answers = _pooled(reply, decisions, answers)


def _pause(local: RunContext) -> ApprovalPause | ClarificationPause:
    if not local.questions:
        return ApprovalPause(requests=local.pending)
    questions = list(dict.fromkeys(question for _, question in local.questions))
    return ClarificationPause(
        question="\n\n".join(questions), asked=[key for key, _ in local.questions]
    )


def _pooled(
    reply: Any, decisions: dict[str, Decision], answers: dict[str, str]
) -> tuple[dict[str, Decision], dict[str, str]]:
    """The pools with ``reply`` (a resume value of :func:`with_pauses`' interrupt) added."""
    given = reply if isinstance(reply, dict) else {}
    approvals = given.get("approvals", {})
    decisions = {**decisions, **{k: decision_of(v) for k, v in approvals.items()}}
    if "answer" in given:
        answers = {**answers, **dict.fromkeys(given.get("asked", []), str(given["answer"]))}
    return decisions, answers


def nested_replies(interrupts: Sequence[Interrupt], ctx: RunContext) -> dict[str, Any] | None:
    """The resume values (by interrupt id) for a nested team's pending interrupts, from the
    replies ``ctx``'s pass holds; ``None`` when one is missing — then what the nested team waits
    for is added to the pass (its questions, its unanswered approvals), to be asked."""
    values: dict[str, Any] = {}
    for item in interrupts:
        pause = pause_of(item.value)
        if isinstance(pause, ClarificationPause):
            key = f"{item.id}:{pause.question}"
            if key in ctx.answers:
                values[item.id] = {"answer": ctx.answers[key], "asked": pause.asked}
            else:
                ctx.questions.append((key, pause.question))
            continue
        missing = [r for r in pause.requests if r.id not in ctx.decisions]
        ctx.pending.extend(missing)
        if not missing:
            decided = {r.id: ctx.decisions[r.id].model_dump() for r in pause.requests}
            values[item.id] = {"approvals": decided}
    return values if len(values) == len(interrupts) else None


def ask_user(question: str) -> str:
    """Pause the run with a clarifying question; returns the user's answer on resume."""
    answer = interrupt(ClarificationPause(question=question).model_dump())
    return str(answer.get("answer", "") if isinstance(answer, dict) else answer)
