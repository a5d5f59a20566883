"""What every dialect asks of a run, and the one place that does it: a turn.

A dialect adapter (:mod:`teamgraph.server.protocols`) parses its request into an :data:`Intent` —
:class:`Start` a run, :class:`Answer` the question a paused run asked, or :class:`Resume` a paused
run with decisions on its tool calls — and :func:`open_turn` carries it out for the caller's
session through the run manager. The :class:`Opened` turn says which run to follow and from
which event on; the adapter's event stream (:mod:`teamgraph.server.protocols.adapter`) follows it.
A chat message is a :class:`Start` with ``chat=True``: the user cannot say whether they answer
the session's paused run or ask something new, so the session's state decides."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamgraph.errors import RunConflict
from teamgraph.events import Event
from teamgraph.result import RunResult
from teamgraph.server import repositories as repo
from teamgraph.server.state import AppState
from teamgraph.status import FINISHED, PAUSED
from teamgraph.storage.direct import Statement
from teamgraph.storage.models import RunRow, SessionRow


# --- what a request asks ----------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    """A new run of the team on ``request`` in the session (``also``: statements stored in the
    run's own transaction). ``chat``: the request is a chat message — while the session's run
    waits for an answer, the message is that answer (``answer`` instead, if given); while it
    waits for decisions on tool calls, the message starts nothing and the turn is a notice."""

    request: str
    template: str | None = None
    chat: bool = False
    answer: str | None = None
    also: Sequence[Statement] = ()


@dataclass(frozen=True)
class Answer:
    """The answer to the question a paused run asked (``run_id``; default: the session's)."""

    text: str
    run_id: str | None = None


@dataclass(frozen=True)
class Resume:
    """Continue a paused (or cancelled, or crashed) run: ``decisions`` on its tool calls by
    request id, ``default`` for the others, and the ``answer`` to its question if it asked one
    (``run_id``; default: the session's paused run)."""

    run_id: str | None = None
    answer: str | None = None
    decisions: Mapping[str, Any] | None = None
    default: Any = None


Intent = Start | Answer | Resume


# --- what a turn is ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Opened:
    """A turn taken in: the run it started or resumed (its events after ``after_seq`` are this
    turn's; ``team``: the served team it runs on), or a ``notice`` when a chat message started
    nothing because the session's run waits for decisions (``waiting``: those tool calls)."""

    run_id: str
    team: str | None
    after_seq: int = 0
    notice: str = ""
    waiting: Sequence[Mapping[str, Any]] = ()


@dataclass
class Turn:
    """A turn followed to its end (or pause): its run's ``result`` and the ``events`` it
    emitted; ``notice``: what to tell the user instead of an answer."""

    run_id: str
    result: RunResult
    events: list[Event] = field(default_factory=list)
    notice: str = ""

    @property
    def question(self) -> str:
        asked = [e for e in self.events if e.type == "clarification_requested"]
        return asked[-1].question if asked else ""

    @property
    def approvals(self) -> list[dict[str, Any]]:
        """The tool calls this turn left waiting for a decision."""
        if self.result.status not in PAUSED:
            return []
        return [e.model_dump() for e in self.events if e.type == "approval_requested"]

    @property
    def paused(self) -> bool:
        return bool(self.question or self.approvals or self.notice)

    @property
    def answer(self) -> str:
        if self.notice:
            return self.notice
        if self.question:
            return self.question
        if self.approvals:
            return waiting_notice(self.approvals)
        if self.result.status in FINISHED:
            return self.result.output
        return f"The run ended with status {self.result.status}: {self.result.error}".strip()


@dataclass(frozen=True)
class Waiting:
    """A session's paused run and what it waits for (``Runner.pending``'s items)."""

    run: RunRow
    pending: list[dict[str, Any]]

    @property
    def asks(self) -> bool:
        """Whether it waits for the answer to a question."""
        return any(p["type"] == "clarification" for p in self.pending)

    @property
    def approvals(self) -> list[dict[str, Any]]:
        return [p for p in self.pending if p["type"] == "approval"]


def waiting_notice(calls: Sequence[Mapping[str, Any]]) -> str:
    """What a chat says while tool calls wait for a human decision, and where to decide."""
    listed = "; ".join(
        f"{c.get('tool')}({json.dumps(c.get('args') or {}, ensure_ascii=False)[:300]})"
        f" asked by {c.get('agent')}"
        for c in calls
    )
    return (
        f"Waiting for your approval: {listed}. Approve or reject it on the Approvals page "
        "(GET /api/v1/approvals/pending); the answer will follow in this chat."
    )


# --- doing it -------------------------------------------------------------------------------
async def open_turn(
    state: AppState, intent: Intent, session: SessionRow | None = None, team: str | None = None
) -> Opened:
    """Carry out ``intent`` for ``session`` (its owner's, on ``team``). Returns once the run is
    stored and its first event is out (or the notice); raises :class:`RunConflict` (409) when
    the session's state does not allow it."""
    if isinstance(intent, Start):
        if session is None or team is None:
            raise TypeError("a new run needs the session and the team")
        if intent.chat:
            return await _chat(state, intent, session, team)
        run_id = await state.runs.start(
            session.user_id, session, team, intent.request, intent.template, intent.also
        )
        return Opened(run_id, team)
    run_id = intent.run_id or await _paused_id(state, session)
    if isinstance(intent, Answer):
        row = await state.runs.resume(run_id, answer=intent.text)
    else:
        reply = {"decisions": intent.decisions, "default": intent.default}
        row = await state.runs.resume(run_id, answer=intent.answer, **reply)
    return Opened(row.id, row.team_name, row.last_seq)


async def _chat(state: AppState, intent: Start, session: SessionRow, team: str) -> Opened:
    """A chat message: a new run, the answer that resumes the session's paused run, or — while
    it waits for decisions on tool calls — a notice that says so."""
    waiting = await waiting_in(state, session.id)
    if waiting is None:
        start = Start(intent.request, intent.template, also=intent.also)
        return await open_turn(state, start, session, team)
    run = waiting.run
    if waiting.asks:
        return await open_turn(state, Answer(intent.answer or intent.request, run.id))
    calls = waiting.approvals
    notice = waiting_notice(calls) if calls else ""
    return Opened(run.id, run.team_name, notice=notice, waiting=calls)


async def _paused_id(state: AppState, session: SessionRow | None) -> str:
    paused = await paused_run(state, session.id) if session is not None else None
    if paused is None:
        raise RunConflict("no run of this session waits for an answer")
    return paused.id


async def paused_run(state: AppState, session_id: str) -> RunRow | None:
    """The session's latest run if it waits for an answer."""
    row = await state.backend.runs.latest_in_session(session_id)
    return row if row is not None and row.status in PAUSED else None


async def waiting_in(state: AppState, session_id: str) -> Waiting | None:
    """The session's paused run and what it waits for, or ``None``."""
    run = await paused_run(state, session_id)
    if run is None:
        return None
    return Waiting(run, await state.runs.runner(run.team_name).pending(run.id))


async def follow(state: AppState, opened: Opened) -> Turn:
    """The turn followed to its end: its events (none for a notice) and its stored result."""
    events = (
        []
        if opened.notice
        else [e async for e in state.runs.events(opened.run_id, opened.after_seq)]
    )
    return Turn(opened.run_id, await result_of(state, opened), events, opened.notice)


async def result_of(state: AppState, opened: Opened) -> RunResult:
    """The stored result of the turn's run."""
    if opened.team is None:
        row = await state.backend.runs.get(opened.run_id)
        return await state.runs.runner(row.team_name).result(opened.run_id)
    return await state.runs.runner(opened.team).result(opened.run_id)


async def remember_pause(state: AppState, session_id: str, text: str, run_id: str) -> None:
    """A question or notice a run paused with is the assistant's message in the history too
    (a finished run's answer is stored by the run manager)."""
    await repo.add_message(state.backend.direct, session_id, "assistant", text, run_id)
