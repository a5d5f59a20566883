"""The LangGraph Agent Protocol under ``/langgraph``, the subset ``langgraph-sdk`` clients (and
the UIs built on it) use: assistants (one per served team), threads (the caller's sessions),
runs — streamed, waited for, or started and joined — with interrupts resumed by
``Command(resume=...)`` and ``Last-Event-ID`` reconnects. Authenticate with ``x-api-key: <API key>``
(the SDK's ``api_key``) or a bearer token.

**In.** A run's ``input.messages``' last human message is a chat
:class:`~teamgraph.server.turns.Start` (while the thread's run waits for an answer, it is that
answer); ``command.resume`` is an :class:`~teamgraph.server.turns.Answer` (a string, when the
run asked a question) or a :class:`~teamgraph.server.turns.Resume` — LangChain's
``{"decisions": [...]}``, or the earlier shapes (:func:`.langgraph_state.decisions`).

**Out.** Stream parts (``event``: the mode, ``data``: JSON, ``id``: the seq of the event they
came from), per requested ``stream_mode``:

- ``values``: the thread's state, ``{"messages": [...]}`` in LangChain's message form, when the run
  starts and when it ends — with ``__interrupt__`` when it paused;
- ``updates``: ``{<step or agent>: {"output": ...}}`` as each workflow step or agent finishes, and
  ``{"__interrupt__": [...]}`` when the run pauses;
- ``messages`` (``messages-tuple``): the answer's tokens as ``[message chunk, metadata]`` pairs;
- ``events``: every teamgraph event as ``{"event": <type>, "data": <event>}``;
- ``custom``: the run's progress lines (plan, steps, tool calls, handoffs).

Thread state and interrupts are in the shapes ``useStream`` reads
(:mod:`.langgraph_state`): tool calls and questions in ``values.messages``, a paused run's
interrupts in ``tasks[-1].interrupts``, tool approvals in LangChain's human-in-the-loop shape.

This module holds the thread and run routes; the assistants and ``/info`` are
:mod:`.langgraph_assistants`, threads as the protocol sees them :mod:`.langgraph_threads`, the
stream parts :mod:`.langgraph_stream`, webhooks :mod:`.langgraph_webhooks`.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, status
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.errors import RunConflict, UsageError
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.protocols import langgraph_assistants as assistants
from teamgraph.server.protocols import langgraph_threads as threads
from teamgraph.server.protocols import langgraph_webhooks as webhooks
from teamgraph.server.protocols.langgraph_state import decisions
from teamgraph.server.protocols.langgraph_stream import StreamParts, modes, parse_last_event_id
from teamgraph.server.protocols.runs import MAX_SEQ
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Answer,
    Intent,
    Opened,
    Resume,
    Start,
    open_turn,
    paused_run,
    waiting_in,
)
from teamgraph.storage.models import RunRow, SessionRow

router = APIRouter(prefix="/langgraph", tags=["LangGraph Agent Protocol"])
router.include_router(assistants.router)
_STATUS = {  # teamgraph's run statuses in the Agent Protocol's words
    "completed": "success",
    "completed_with_errors": "success",
    "failed": "error",
    "budget_exceeded": "error",
    "cancelled": "interrupted",  # as a run stopped by `cancel` is there: resumable
    "interrupted": "interrupted",  # paused for a human
}


class RunIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # the SDK's other options are accepted, unused

    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    metadata: dict[str, Any] | None = None  # a run without a thread: its thread's
    if_not_exists: Literal["create", "reject"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    webhook: str | None = Field(default=None, max_length=2000)


THREAD_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


class ThreadIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    thread_id: str | None = Field(default=None, max_length=64, pattern=f"^{THREAD_ID.pattern}$")
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadPatch(BaseModel):
    model_config = ConfigDict(extra="allow")

    metadata: dict[str, Any] = Field(default_factory=dict)


# --- threads -------------------------------------------------------------------------------
@router.post("/threads")
async def create_thread(body: ThreadIn, user: CurrentUser, state: State, db: Db) -> dict[str, Any]:
    """A new thread; with ``if_exists="do_nothing"`` an existing one of the caller's is
    returned as it is."""
    if body.thread_id and body.if_exists == "do_nothing":
        mine = await repo.owned_session(db, user.id, body.thread_id)
        if mine is not None:
            return await threads.thread(state, mine)
    row = await threads.create(db, state, user.id, body.thread_id, body.metadata)
    return threads.thread_of(row, {"messages": []}, [], busy=False)  # new: nothing to look up


@router.post("/threads/search")
async def search_threads(
    user: CurrentUser, state: State, db: Db, body: threads.ThreadQuery | None = None
) -> list[dict[str, Any]]:
    return await threads.search(db, state, user.id, body or threads.ThreadQuery())


@router.post("/threads/count")
async def count_threads(
    user: CurrentUser, state: State, db: Db, body: threads.ThreadQuery | None = None
) -> int:
    query = (body or threads.ThreadQuery()).model_copy(update={"limit": 1000, "offset": 0})
    return len(await threads.matching(db, state, user.id, query))


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    return await threads.thread(state, await threads.owned(state, user.id, thread_id))


@router.patch("/threads/{thread_id}")
async def update_thread(
    thread_id: str, body: ThreadPatch, user: CurrentUser, state: State
) -> dict[str, Any]:
    """Merge ``metadata`` into the thread's."""
    row = await threads.owned(state, user.id, thread_id)
    row.meta = {**threads.metadata_of(row), **body.metadata}
    await state.backend.direct.run([repo.set_meta(row.id, row.meta)])
    return await threads.thread(state, row)


@router.delete("/threads/{thread_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_thread(thread_id: str, user: CurrentUser, state: State, db: Db) -> None:
    """Delete the thread and its messages (its runs' records stay, as a session's do; a run
    waiting for a human is closed first); a thread whose run is executing is a 409 — cancel the
    run first."""
    row = await repo.owned_session(db, user.id, thread_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Thread not found")
    if state.runs.live_in(row.id) is not None:
        raise RunConflict("the thread's run is executing; cancel it first")
    if (paused := await paused_run(state, row.id)) is not None:
        await state.runs.cancel(paused.id)
    await repo.delete_session(db, row)


@router.post("/threads/{thread_id}/copy")
async def copy_thread(thread_id: str, user: CurrentUser, state: State, db: Db) -> dict[str, Any]:
    """A new thread with the thread's metadata, team and messages (not a paused run: the copy
    is idle)."""
    row = await threads.owned(state, user.id, thread_id)
    copy = await threads.create(db, state, user.id, None, threads.metadata_of(row))
    await repo.copy_session(db, row, copy)
    return await threads.thread(state, copy)


@router.get("/threads/{thread_id}/state")
async def thread_state(thread_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    return await threads.thread_state(state, await threads.owned(state, user.id, thread_id))


@router.post("/threads/{thread_id}/state")
async def update_thread_state(thread_id: str, user: CurrentUser, state: State) -> None:
    """Not supported: a thread's state is what its runs did (see docs/langgraph.md)."""
    await threads.owned(state, user.id, thread_id)
    raise HTTPException(
        status.HTTP_501_NOT_IMPLEMENTED,
        detail="threads.update_state is not supported: a thread's state is what its runs did",
    )


@router.post("/threads/{thread_id}/history")
async def thread_history(thread_id: str, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """The thread's current state only (teamgraph keeps no checkpoints a client can go back
    to): what ``useStream`` reads as the head of the history."""
    return [await threads.thread_state(state, await threads.owned(state, user.id, thread_id))]


# --- runs ----------------------------------------------------------------------------------
@router.post("/threads/{thread_id}/runs/stream", response_class=StreamingResponse)
async def stream_run(
    thread_id: str, body: RunIn, user: CurrentUser, state: State
) -> StreamingResponse:
    opened = await _open(state, user.id, thread_id, body)
    return _streamed(state, opened, thread_id, body)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(thread_id: str, body: RunIn, user: CurrentUser, state: State) -> JSONResponse:
    opened = await _open(state, user.id, thread_id, body)
    return await _waited(state, opened, thread_id)


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, body: RunIn, user: CurrentUser, state: State) -> JSONResponse:
    opened = await _open(state, user.id, thread_id, body)
    return _located(await _run(state, opened.run_id), thread_id, opened.run_id)


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    thread_id: str,
    user: CurrentUser,
    state: State,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    run_status: Annotated[str | None, Query(alias="status")] = None,
) -> list[dict[str, Any]]:
    """The thread's runs, newest first (``status``: in the protocol's words)."""
    await threads.owned(state, user.id, thread_id)
    rows = await state.backend.runs.list(1000, session_id=thread_id, user_id=user.id)
    runs = [_run_of_row(state, row) for row in rows]
    runs = [r for r in runs if run_status is None or r["status"] == run_status]
    return runs[offset : offset + limit]


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> None:
    """Not supported: a run's record is the thread's history (see docs/langgraph.md)."""
    await _run_of(state, user.id, thread_id, run_id)
    raise HTTPException(
        status.HTTP_501_NOT_IMPLEMENTED,
        detail="runs.delete is not supported: a run's record stays with its thread",
    )


# runs without a thread: each makes one (kept, so it can be joined or resumed by the id in
# Content-Location, but listed by threads.search only with on_completion="keep")
@router.post("/runs/stream", response_class=StreamingResponse)
async def stream_stateless_run(
    body: RunIn, user: CurrentUser, state: State, db: Db
) -> StreamingResponse:
    thread_id = await _stateless(db, state, user.id, body)
    opened = await _open(state, user.id, thread_id, body)
    return _streamed(state, opened, thread_id, body)


@router.post("/runs/wait")
async def wait_stateless_run(body: RunIn, user: CurrentUser, state: State, db: Db) -> JSONResponse:
    thread_id = await _stateless(db, state, user.id, body)
    opened = await _open(state, user.id, thread_id, body)
    return await _waited(state, opened, thread_id)


@router.post("/runs")
async def create_stateless_run(
    body: RunIn, user: CurrentUser, state: State, db: Db
) -> JSONResponse:
    thread_id = await _stateless(db, state, user.id, body)
    opened = await _open(state, user.id, thread_id, body)
    return _located(await _run(state, opened.run_id), thread_id, opened.run_id)


async def _stateless(db: AsyncSession, state: AppState, user_id: str, body: RunIn) -> str:
    if body.command:
        raise UsageError("command: a run without a thread has nothing to resume")
    assistants.served(state, body.assistant_id)
    origin = threads.ORIGIN if body.on_completion == "keep" else threads.STATELESS
    row = await threads.create(db, state, user_id, None, dict(body.metadata or {}), origin)
    return row.id


def _location(thread_id: str, run_id: str) -> dict[str, str]:
    return {"Content-Location": f"/langgraph/threads/{thread_id}/runs/{run_id}"}


def _located(content: Any, thread_id: str, run_id: str) -> JSONResponse:
    return JSONResponse(content, headers=_location(thread_id, run_id))


def _streamed(state: AppState, opened: Opened, thread_id: str, body: RunIn) -> StreamingResponse:
    parts = StreamParts(state, opened, thread_id, modes(body.stream_mode))
    return parts.response(_location(thread_id, opened.run_id))


async def _waited(state: AppState, opened: Opened, thread_id: str) -> JSONResponse:
    await _ended(state, opened)
    return _located(await threads.values_by_id(state, thread_id), thread_id, opened.run_id)


async def _ended(state: AppState, opened: Opened) -> None:
    """Once the turn's run has ended or paused."""
    async for _ in state.runs.events(opened.run_id, opened.after_seq):
        pass


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    await _run_of(state, user.id, thread_id, run_id)
    return await _run(state, run_id)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    await _run_of(state, user.id, thread_id, run_id)
    async for _ in state.runs.events(run_id):
        pass
    return await threads.values_by_id(state, thread_id)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=StreamingResponse)
async def join_stream(
    thread_id: str,
    run_id: str,
    user: CurrentUser,
    state: State,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """A run's stream from the start, or after ``Last-Event-ID`` (a reconnect)."""
    row = await _run_of(state, user.id, thread_id, run_id)
    skip = parse_last_event_id(last_event_id)
    after = skip[0] - 1 if skip and skip[1] >= 0 else skip[0] if skip else 0
    opened = Opened(run_id, row.team_name, max(after, 0))
    asked = modes(stream_mode or ["values"])
    return StreamParts(state, opened, thread_id, asked, skip).response()


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=status.HTTP_202_ACCEPTED)
async def cancel_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> None:
    await _run_of(state, user.id, thread_id, run_id)
    await state.runs.cancel(run_id)


async def _open(state: AppState, user_id: str, thread_id: str, body: RunIn) -> Opened:
    """Start the run the body asks for on the thread, or resume its paused run; with a
    ``webhook``, call it once the run ends or pauses."""
    assistants.served(state, body.assistant_id)
    secret = state.settings.webhook_secret
    webhook = webhooks.checked(body.webhook, secret) if body.webhook else None
    row = await _thread_for(state, user_id, thread_id, body)
    await _multitask(state, row, body)
    binding = await _bind(state, row, body.assistant_id)
    if body.command and "resume" in body.command:
        intent = await _resume(state, row, body.command["resume"])
    else:
        text = _last_human((body.input or {}).get("messages", []))
        intent = Start(text, chat=True, also=binding)
    opened = await open_turn(state, intent, row, row.team)
    if webhook and not opened.notice:
        payload = partial(_webhook_payload, state, thread_id, opened.run_id)
        webhooks.schedule(webhook, secret, _ended(state, opened), payload)
    return opened


async def _thread_for(state: AppState, user_id: str, thread_id: str, body: RunIn) -> SessionRow:
    """The user's thread ``thread_id`` — made first with ``if_not_exists="create"``."""
    if body.if_not_exists == "create":
        if not THREAD_ID.fullmatch(thread_id):
            raise UsageError(f"thread_id: {thread_id[:80]!r} is not 1-64 of A-Z a-z 0-9 _ . : -")
        async with state.sessions() as db:
            if await repo.claimed_session(db, thread_id) is None:
                return await threads.create(db, state, user_id, thread_id, {})
    return await threads.owned(state, user_id, thread_id)


async def _multitask(state: AppState, row: SessionRow, body: RunIn) -> None:
    """A new run on a thread whose run is executing: ``reject`` (the default: 409),
    ``interrupt`` (cancel it — it stays resumable — and start), ``enqueue`` (start once it has
    ended or paused); ``rollback`` is not supported."""
    live = state.runs.live_in(row.id)
    strategy = body.multitask_strategy or "reject"
    if strategy == "rollback":
        raise UsageError(
            "multitask_strategy: 'rollback' is not supported; use reject, interrupt or enqueue"
        )
    if live is None or strategy == "reject" or (body.command and "resume" in body.command):
        return
    if strategy == "interrupt":
        await state.runs.cancel(live)
    else:
        async for _ in state.runs.events(live, MAX_SEQ):  # nothing read: its end awaited
            pass


async def _webhook_payload(state: AppState, thread_id: str, run_id: str) -> dict[str, Any]:
    run = _run_of_row(state, await state.backend.runs.get(run_id), live=False)
    return {**run, "values": await threads.values_by_id(state, thread_id)}


async def _bind(state: AppState, row: SessionRow, team: str) -> list[Any]:
    """A thread runs one team: its first run's (a thread with runs on another is a 409); its
    metadata names it (``graph_id``, ``assistant_id``). The statements that bind it go in the
    run's own transaction."""
    binding = []
    if row.team != team:
        if await state.backend.runs.latest_in_session(row.id) is not None:
            raise HTTPException(
                status.HTTP_409_CONFLICT, detail=f"thread runs assistant {row.team!r}"
            )
        row.team = team
        binding.append(repo.bind_team(row.id, team))
    if threads.metadata_of(row).get("graph_id") != team:
        row.meta = threads.ran_on(row, team)
        binding.append(repo.set_meta(row.id, row.meta))
    return binding


def _last_human(messages: list[Any]) -> str:
    for item in reversed(messages):
        if isinstance(item, dict) and item.get("role", item.get("type")) in ("user", "human"):
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            if isinstance(content, str) and content.strip():
                return content
    raise HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT, detail="input.messages: no human message with text"
    )


async def _resume(state: AppState, row: SessionRow, value: Any) -> Intent:
    """``Command(resume=value)`` for the thread's paused run: the answer to its question, or
    decisions on its tool calls."""
    waiting = await waiting_in(state, row.id)
    if waiting is None:
        raise RunConflict("the thread has no interrupted run")
    run_id = waiting.run.id
    if waiting.asks:
        if not isinstance(value, str):
            raise UsageError("the run asked a question: resume with the answer, a string")
        return Answer(value, run_id)
    by_request, default = decisions(value, waiting.approvals)
    return Resume(run_id, decisions=by_request, default=default)


async def _run_of(state: AppState, user_id: str, thread_id: str, run_id: str) -> RunRow:
    """The user's run ``run_id`` of thread ``thread_id`` — 404 otherwise (a run outlives its
    deleted thread in the runs table, not here)."""
    row = await state.backend.runs.owned(run_id, user_id)
    if row is None or row.session_id != thread_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
    await threads.owned(state, user_id, thread_id)
    return row


async def _run(state: AppState, run_id: str) -> dict[str, Any]:
    return _run_of_row(state, await state.backend.runs.get(run_id))


def _run_of_row(state: AppState, row: RunRow, live: bool = True) -> dict[str, Any]:
    """A run as the protocol shows it (``live``: say ``running`` while it executes here)."""
    executing = live and state.runs.live_in(row.session_id or "") == row.id
    return {
        "run_id": row.id,
        "thread_id": row.session_id,
        "assistant_id": row.team_name,
        "status": "running" if executing else _STATUS.get(row.status, "pending"),
        "created_at": threads.iso(row.created_at),
        "updated_at": threads.iso(row.updated_at),
        "metadata": {},
        "kwargs": {},
        "multitask_strategy": "reject",
    }
