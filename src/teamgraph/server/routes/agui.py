"""``POST /agui/{team}``: run a team from an AG-UI ``RunAgentInput`` and stream AG-UI events
(:mod:`teamgraph.server.agui_events`), for AG-UI front ends (CopilotKit and others).

The input's ``threadId`` is the team's thread: a session of the user's, made on first use (a
thread of another user's is not found). The last user message is the request — or, while the
thread's run waits for an answer, the answer. ``resume`` entries answer the interrupts a run
finished with: the clarifying question (``payload``: the answer) and tool approvals
(``payload``: ``{action: approve|reject|edit, comment?, args?}``; ``cancelled``: rejected).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import BaseEvent, ResumeEntry, RunAgentInput, RunErrorEvent
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.errors import UsageError
from teamgraph.server import repositories as repo
from teamgraph.server.agui_events import Translation, clarification_id
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.sse import one_line
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, open_turn, paused_run
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/agui", tags=["AG-UI"])
log = logging.getLogger(__name__)
_THREAD = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


@router.post("/{team}")
async def run_agent(
    team: str, body: RunAgentInput, user: CurrentUser, state: State, db: Db
) -> StreamingResponse:
    if team not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no team named {team!r}")
    session = await _thread(db, user.id, team, body.thread_id)
    await db.close()  # give the request's connection back: a whole run needs the pool
    if body.resume:
        opened = await _resume(state, session, body.resume)
    else:
        opened = await open_turn(state, user.id, session, team, _request(body))
    encoder = EventEncoder()
    return StreamingResponse(
        _stream(state, body, opened, encoder), media_type=encoder.get_content_type()
    )


def _request(body: RunAgentInput) -> str:
    for message in reversed(body.messages):
        if message.role == "user":
            content: Any = message.content
            text = content if isinstance(content, str) else _text_parts(content)
            if text.strip():
                return text
    raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail="no user message with text")


def _text_parts(parts: Sequence[Any]) -> str:
    return "".join(getattr(p, "text", "") or "" for p in parts if getattr(p, "type", "") == "text")


async def _thread(db: AsyncSession, user_id: str, team: str, thread_id: str) -> SessionRow:
    """The user's session for ``thread_id`` (made on first use, on ``team``)."""
    if not _THREAD.fullmatch(thread_id):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail="threadId: 1-64 letters, digits or . _ : -",
        )
    row = await db.get(SessionRow, thread_id)
    if row is None:
        return await repo.create_session(db, user_id, session_id=thread_id, team=team)
    if row.user_id != user_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Thread not found")
    if row.team != team:
        raise HTTPException(
            status.HTTP_409_CONFLICT, detail=f"thread {thread_id} runs team {row.team!r}"
        )
    return row


async def _resume(state: AppState, session: SessionRow, entries: list[ResumeEntry]) -> Opened:
    """Answer the interrupts the thread's paused run finished with, and resume it."""
    paused = await paused_run(state, session.id)
    if paused is None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="the thread has no paused run")
    answer: str | None = None
    decisions: dict[str, dict[str, Any]] = {}
    for entry in entries:
        payload = entry.payload
        if entry.interrupt_id == clarification_id(paused.id):
            answer = payload if isinstance(payload, str) else str((payload or {}).get("answer", ""))
        elif entry.status == "cancelled":
            decisions[entry.interrupt_id] = {"action": "reject", "comment": "cancelled"}
        elif isinstance(payload, dict):
            decisions[entry.interrupt_id] = payload
        else:
            raise UsageError(f"resume {entry.interrupt_id}: payload must be a decision object")
    await state.runs.resume(paused.id, answer=answer, decisions=decisions or None)
    return Opened(paused.id, paused.team_name, paused.last_seq)


def _frame(encoder: EventEncoder, event: BaseEvent) -> str:
    """The AG-UI encoder's frame, one line for every line reader (see ``server.sse``)."""
    return one_line(encoder.encode(event))


async def _stream(
    state: AppState, body: RunAgentInput, opened: Opened, encoder: EventEncoder
) -> AsyncIterator[str]:
    pattern = state.teams[opened.team].spec.pattern
    told = Translation(body.thread_id, body.run_id, pattern, teamgraph_run=opened.run_id)
    for out in told.start():
        yield _frame(encoder, out)
    try:
        if opened.notice:  # the thread's run waits for decisions made elsewhere: say which
            pending = await state.runs.runner(opened.team).pending(opened.run_id)
            told.approvals = [p for p in pending if p["type"] == "approval"]
        else:
            async for event in state.runs.events(opened.run_id, opened.after_seq):
                for out in told.events(event):
                    yield _frame(encoder, out)
        result = await state.runs.runner(opened.team).result(opened.run_id)
        ending: list[BaseEvent] = told.finish(result.status, result.error, result.usage)
    except Exception as exc:  # the stream has begun: the protocol's way to fail is RUN_ERROR
        log.exception("AG-UI stream of run %s failed", opened.run_id)
        ending = [RunErrorEvent(message=f"{type(exc).__name__}: {exc}", code="internal_error")]
    for out in ending:
        yield _frame(encoder, out)
