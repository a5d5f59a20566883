"""The LangGraph Agent Protocol under ``/langgraph``, the subset ``langgraph-sdk`` clients (and
the UIs built on it) use: assistants (one per served team), threads (the caller's sessions),
runs — streamed (:mod:`teamgraph.server.lg_parts`), waited for, or started and joined — with
interrupts resumed by ``Command(resume=...)`` and ``Last-Event-ID`` reconnects. Authenticate with
``x-api-key: <API key>`` (the SDK's ``api_key``) or a bearer token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import bindparam, select, update

from teamgraph.errors import UsageError
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State, owned_or_404
from teamgraph.server.lg_parts import MODES, Parts, interrupt_value, message, sse
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, open_turn, paused_run
from teamgraph.storage.models import RunRow, SessionRow

router = APIRouter(prefix="/langgraph", tags=["LangGraph Agent Protocol"])
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


class ThreadIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    thread_id: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- assistants ----------------------------------------------------------------------------
def _assistant(state: AppState, name: str) -> dict[str, Any]:
    spec = state.teams[name].spec
    return {
        "assistant_id": name,
        "graph_id": name,
        "name": name,
        "description": spec.description,
        "config": {},
        "context": {},
        "metadata": {"pattern": spec.pattern},
        "version": 1,
        "created_at": _EPOCH,
        "updated_at": _EPOCH,
    }


_EPOCH = "1970-01-01T00:00:00+00:00"


@router.post("/assistants/search")
async def search_assistants(user: CurrentUser, state: State) -> list[dict[str, Any]]:
    return [_assistant(state, name) for name in sorted(state.teams)]


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    if assistant_id not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Assistant not found")
    return _assistant(state, assistant_id)


# --- threads -------------------------------------------------------------------------------
@router.post("/threads")
async def create_thread(body: ThreadIn, user: CurrentUser, state: State, db: Db) -> dict[str, Any]:
    if body.thread_id and await db.get(SessionRow, body.thread_id) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="Thread already exists")
    first = sorted(state.teams)[0]  # a thread takes its team from its first run
    row = await repo.create_session(
        db, user.id, session_id=body.thread_id, team=first, name="LangGraph thread"
    )
    return _thread_of(row, {"messages": []}, [], busy=False)  # new: nothing to look up


@router.post("/threads/search")
async def search_threads(user: CurrentUser, state: State, db: Db) -> list[dict[str, Any]]:
    return [await _thread(state, row) for row in await repo.list_sessions(db, user.id)]


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    return await _thread(state, await _owned(state, user.id, thread_id))


@router.get("/threads/{thread_id}/state")
async def thread_state(thread_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    return await _state(state, await _owned(state, user.id, thread_id))


@router.post("/threads/{thread_id}/history")
async def thread_history(thread_id: str, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    return [await _state(state, await _owned(state, user.id, thread_id))]


async def _owned(state: AppState, user_id: str, thread_id: str) -> SessionRow:
    return await owned_or_404(
        state, repo.OWNED_SESSION, "Thread", session_id=thread_id, user_id=user_id
    )


async def _thread(state: AppState, row: SessionRow) -> dict[str, Any]:
    current = await _state(state, row)
    busy = await _live_run(state, row.id) is not None
    return _thread_of(row, current["values"], current["interrupts"], busy)


def _thread_of(
    row: SessionRow, values: dict[str, Any], interrupts: list[dict[str, Any]], busy: bool
) -> dict[str, Any]:
    return {
        "thread_id": row.id,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "metadata": {"team": row.team},
        "status": "busy" if busy else ("interrupted" if interrupts else "idle"),
        "values": values,
        "interrupts": {"__root__": interrupts} if interrupts else {},
    }


async def _state(state: AppState, row: SessionRow) -> dict[str, Any]:
    async with state.sessions() as db:
        stored = await repo.messages(db, row.id)
    messages = [message(m.role, m.content, str(m.id)) for m in stored]
    interrupts: list[dict[str, Any]] = []
    paused = await paused_run(state, row.id)
    if paused is not None:
        pending = await state.runs.runner(paused.team_name).pending(paused.id)
        interrupts = [interrupt_value(p) for p in pending]
    return {
        "values": {"messages": messages},
        "next": [],
        "tasks": [],
        "interrupts": interrupts,
        "metadata": {"team": row.team},
        "created_at": _iso(row.updated_at),
        "checkpoint": {"thread_id": row.id, "checkpoint_ns": "", "checkpoint_id": None},
        "parent_checkpoint": None,
    }


# --- runs ----------------------------------------------------------------------------------
@router.post("/threads/{thread_id}/runs/stream", response_model=None)
async def stream_run(
    thread_id: str, body: RunIn, user: CurrentUser, state: State
) -> StreamingResponse:
    opened = await _open(state, user.id, thread_id, body)
    headers = {"Content-Location": f"/langgraph/threads/{thread_id}/runs/{opened.run_id}"}
    parts = _stream(state, opened, thread_id, _modes(body.stream_mode))
    return StreamingResponse(parts, media_type="text/event-stream", headers=headers)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(thread_id: str, body: RunIn, user: CurrentUser, state: State) -> dict[str, Any]:
    opened = await _open(state, user.id, thread_id, body)
    async for _ in state.runs.events(opened.run_id, opened.after_seq):
        pass
    return await _values(state, thread_id)


@router.post("/threads/{thread_id}/runs")
async def create_run(
    thread_id: str, body: RunIn, user: CurrentUser, state: State
) -> dict[str, Any]:
    opened = await _open(state, user.id, thread_id, body)
    return await _run(state, opened.run_id)


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    await _run_of(state, user.id, thread_id, run_id)
    return await _run(state, run_id)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    await _run_of(state, user.id, thread_id, run_id)
    async for _ in state.runs.events(run_id):
        pass
    return await _values(state, thread_id)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_model=None)
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
    after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    opened = Opened(run_id, row.team_name, after)
    modes = _modes(stream_mode or ["values"])
    return StreamingResponse(
        _stream(state, opened, thread_id, modes, resumed=after > 0),
        media_type="text/event-stream",
    )


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=status.HTTP_202_ACCEPTED)
async def cancel_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> None:
    await _run_of(state, user.id, thread_id, run_id)
    await state.runs.cancel(run_id)


async def _open(state: AppState, user_id: str, thread_id: str, body: RunIn) -> Opened:
    """Start the run the body asks for on the thread, or resume its paused run."""
    if body.assistant_id not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Assistant not found")
    row, binding = await _bind(state, await _owned(state, user_id, thread_id), body.assistant_id)
    if body.command and "resume" in body.command:
        return await _resume(state, row, body.command["resume"])
    text = _last_human((body.input or {}).get("messages", []))
    return await open_turn(state, user_id, row, row.team, text, also=binding)


async def _bind(state: AppState, row: SessionRow, team: str) -> tuple[SessionRow, list[Any]]:
    """A thread runs one team: its first run's (a thread with runs on another is a 409). The
    statement that binds it goes in the run's own transaction."""
    if row.team == team:
        return row, []
    ran = select(RunRow.id).where(RunRow.session_id == row.id).limit(1)
    if await state.backend.direct.rows(ran):
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"thread runs assistant {row.team!r}")
    bind = update(SessionRow).where(SessionRow.id == row.id).values(team=team)
    row.team = team
    return row, [(bind, None)]


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


async def _resume(state: AppState, row: SessionRow, value: Any) -> Opened:
    paused = await paused_run(state, row.id)
    if paused is None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="the thread has no interrupted run")
    pending = await state.runs.runner(paused.team_name).pending(paused.id)
    asks = any(p["type"] == "clarification" for p in pending)
    if asks:
        if not isinstance(value, str):
            raise UsageError("the run asked a question: resume with the answer, a string")
        await state.runs.resume(paused.id, answer=value)
    elif isinstance(value, dict) and "action" in value:
        await state.runs.resume(paused.id, default=value)
    elif isinstance(value, dict):
        await state.runs.resume(paused.id, decisions=value)
    else:
        raise UsageError("resume tool approvals with {'action': ...} or {id: {'action': ...}}")
    return Opened(paused.id, paused.team_name, paused.last_seq)


async def _stream(
    state: AppState,
    opened: Opened,
    thread_id: str,
    modes: set[str],
    resumed: bool = False,
) -> AsyncIterator[str]:
    parts = Parts(modes, state.teams[opened.team].spec.pattern, opened.run_id)
    if not resumed:
        yield sse("metadata", {"run_id": opened.run_id, "attempt": 1})
        if "values" in modes:
            yield sse("values", (await _values(state, thread_id)), opened.after_seq)
    last = opened.after_seq
    async for event in state.runs.events(opened.run_id, opened.after_seq):
        last = event.seq
        for kind, data in parts.of(event):
            yield sse(kind, data, event.seq)
    values = await _values(state, thread_id)
    if values.get("__interrupt__") and "updates" in modes:
        yield sse("updates", {"__interrupt__": values["__interrupt__"]}, last)
    if "values" in modes:
        yield sse("values", values, last)


async def _values(state: AppState, thread_id: str) -> dict[str, Any]:
    async with state.sessions() as db:
        row = await db.get(SessionRow, thread_id)
    assert row is not None
    current = await _state(state, row)
    values: dict[str, Any] = dict(current["values"])
    if current["interrupts"]:
        values["__interrupt__"] = current["interrupts"]
    return values


_THREAD_RUN = select(RunRow).where(
    RunRow.id == bindparam("run_id"),
    RunRow.session_id == bindparam("thread_id"),
    RunRow.user_id == bindparam("user_id"),
)


async def _run_of(state: AppState, user_id: str, thread_id: str, run_id: str) -> RunRow:
    params = {"run_id": run_id, "thread_id": thread_id, "user_id": user_id}
    return await owned_or_404(state, _THREAD_RUN, "Run", **params)


async def _run(state: AppState, run_id: str) -> dict[str, Any]:
    row = await state.backend.runs.get(run_id)
    live = await _live_run(state, row.session_id or "")
    run_status = "running" if live == run_id else _STATUS.get(row.status, "pending")
    return {
        "run_id": row.id,
        "thread_id": row.session_id,
        "assistant_id": row.team_name,
        "status": run_status,
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "metadata": {},
        "kwargs": {},
        "multitask_strategy": "reject",
    }


async def _live_run(state: AppState, thread_id: str) -> str | None:
    """The run executing on the thread in this process, if any."""
    async with state.sessions() as db:
        ids = (await db.scalars(select(RunRow.id).where(RunRow.session_id == thread_id))).all()
    return next((i for i in ids if state.runs.owner(i) is not None), None)


def _modes(asked: str | list[str]) -> set[str]:
    modes = {asked} if isinstance(asked, str) else set(asked)
    unknown = modes - set(MODES)
    if unknown:
        raise UsageError(f"stream_mode: {sorted(unknown)} not supported; use {', '.join(MODES)}")
    return modes


def _iso(when: datetime) -> str:
    return when.isoformat()
