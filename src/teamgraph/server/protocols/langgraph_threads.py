"""Agent Protocol threads: the caller's sessions made by the protocol (``origin`` "langgraph"),
their metadata, state and search — what the thread routes of :mod:`.agent_protocol` answer.

A thread's ``metadata`` is what its client gave it, with ``graph_id`` and ``assistant_id`` (the
team) once it has run, as a LangGraph server adds them; ``threads.search`` filters on it (as
agent-chat-ui does, by ``graph_id``), on ``values``, ``status`` and ``ids``, and pages with
``limit`` and ``offset``. Only the protocol's own threads are listed: not the sessions of the
web app or of the OpenAI route, nor the threads of runs without a thread."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import HTTPException, status
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.server import repositories as repo
from teamgraph.server.deps import owned_or_404
from teamgraph.server.protocols.langgraph_state import MESSAGE_EVENTS, interrupts, thread_messages
from teamgraph.server.state import AppState
from teamgraph.server.turns import waiting_in
from teamgraph.storage.models import SessionRow

ORIGIN = "langgraph"  # a thread made by the protocol, listed by threads.search
STATELESS = "langgraph:stateless"  # the thread of a run without one: kept, never listed
NAME = "LangGraph thread"
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]


class ThreadQuery(BaseModel):
    """``threads.search`` / ``threads.count``'s body."""

    model_config = ConfigDict(extra="allow")  # the SDK's other options are accepted, unused

    metadata: dict[str, Any] = Field(default_factory=dict)
    values: dict[str, Any] = Field(default_factory=dict)
    status: ThreadStatus | None = None
    ids: list[str] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


# --- one thread ------------------------------------------------------------------------------
async def owned(state: AppState, user_id: str, thread_id: str) -> SessionRow:
    """The user's session ``thread_id`` — 404 otherwise (never leaks another's)."""
    return await owned_or_404(
        state, repo.OWNED_SESSION, "Thread", session_id=thread_id, user_id=user_id
    )


async def create(
    db: AsyncSession,
    state: AppState,
    user_id: str,
    thread_id: str | None,
    metadata: dict[str, Any],
    origin: str = ORIGIN,
) -> SessionRow:
    """A new thread (``thread_id``: the client's, if free — 409 if taken)."""
    if thread_id and await repo.claimed_session(db, thread_id) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="Thread already exists")
    first = sorted(state.teams)[0]  # a thread takes its team from its first run
    return await repo.create_session(
        db, user_id, session_id=thread_id, team=first, name=NAME, origin=origin, meta=metadata
    )


def metadata_of(row: SessionRow) -> dict[str, Any]:
    return dict(row.meta or {})


def ran_on(row: SessionRow, team: str) -> dict[str, Any]:
    """The thread's metadata once it runs ``team``."""
    return {**metadata_of(row), "graph_id": team, "assistant_id": team}


async def thread_state(state: AppState, row: SessionRow) -> dict[str, Any]:
    """The thread's state as ``threads.get_state`` and ``get_history`` return it: while its run
    waits for a human, ``next`` names the team and ``tasks[-1].interrupts`` says what for (where
    ``useStream`` looks once a stream has ended)."""
    async with state.sessions() as db:
        stored = await repo.messages(db, row.id)
    runs = {m.run_id for m in stored if m.run_id}
    events = await state.backend.runs.events_of(runs, MESSAGE_EVENTS)
    waiting = await waiting_in(state, row.id)
    paused = interrupts(waiting.pending) if waiting else []
    task = {
        "id": waiting.run.id if waiting else "",
        "name": row.team,
        "path": ["__pregel_pull", row.team],
        "error": None,
        "interrupts": paused,
        "checkpoint": None,
        "state": None,
        "result": None,
    }
    return {
        "values": {"messages": thread_messages(stored, events)},
        "next": [row.team] if paused else [],
        "tasks": [task] if paused else [],
        "interrupts": paused,
        "metadata": metadata_of(row),
        "created_at": iso(row.updated_at),
        "checkpoint": {"thread_id": row.id, "checkpoint_ns": "", "checkpoint_id": None},
        "parent_checkpoint": None,
    }


async def thread(state: AppState, row: SessionRow) -> dict[str, Any]:
    """The thread as ``threads.get`` returns it."""
    current = await thread_state(state, row)
    busy = state.runs.live_in(row.id) is not None
    return thread_of(row, current["values"], current["interrupts"], busy)


def thread_of(
    row: SessionRow, values: dict[str, Any], paused: list[dict[str, Any]], busy: bool
) -> dict[str, Any]:
    return {
        "thread_id": row.id,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "metadata": metadata_of(row),
        "status": "busy" if busy else ("interrupted" if paused else "idle"),
        "values": values,
        "interrupts": {"__root__": paused} if paused else {},
    }


async def values_of(state: AppState, row: SessionRow) -> dict[str, Any]:
    """The thread's values, with ``__interrupt__`` while its run waits for a human."""
    current = await thread_state(state, row)
    values: dict[str, Any] = dict(current["values"])
    if current["interrupts"]:
        values["__interrupt__"] = current["interrupts"]
    return values


async def values_by_id(state: AppState, thread_id: str) -> dict[str, Any]:
    """:func:`values_of` the thread ``thread_id`` (one the caller was shown already)."""
    async with state.sessions() as db:
        row = await repo.claimed_session(db, thread_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Thread not found")
    return await values_of(state, row)


# --- many threads ----------------------------------------------------------------------------
async def search(
    db: AsyncSession, state: AppState, user_id: str, query: ThreadQuery
) -> list[dict[str, Any]]:
    """The user's threads that match ``query``, the page it asks for."""
    found = await matching(db, state, user_id, query)
    if query.sort_by:
        found.sort(key=lambda t: t[query.sort_by or ""], reverse=query.sort_order != "asc")
    elif query.sort_order == "asc":
        found.reverse()
    return found[query.offset : query.offset + query.limit]


async def matching(
    db: AsyncSession, state: AppState, user_id: str, query: ThreadQuery
) -> list[dict[str, Any]]:
    """Every thread of the user's that matches ``query`` (latest first). The metadata and ids
    are checked before any state is read."""
    rows = [
        row
        for row in await repo.list_sessions(db, user_id, origin=ORIGIN)
        if contains(metadata_of(row), query.metadata) and (query.ids is None or row.id in query.ids)
    ]
    if not query.values and query.status is None:  # only the page's state is needed
        rows = rows[: query.offset + query.limit] if not query.sort_by else rows
    threads = [await thread(state, row) for row in rows]
    return [
        t
        for t in threads
        if contains(t["values"], query.values)
        and (query.status is None or t["status"] == query.status)
    ]


def contains(document: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether ``document`` has every key of ``wanted`` with its value (LangGraph's filter)."""
    return all(key in document and document[key] == value for key, value in wanted.items())


def iso(when: datetime) -> str:
    return when.isoformat()
