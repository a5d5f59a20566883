"""The LangGraph Agent Protocol under ``/langgraph``, the subset ``langgraph-sdk`` clients (and
the UIs built on it) use: assistants (one per served team), threads (the caller's sessions),
runs — streamed, waited for, or started and joined — with interrupts resumed by
``Command(resume=...)`` and ``Last-Event-ID`` reconnects. Authenticate with ``x-api-key: <API key>``
(the SDK's ``api_key``) or a bearer token.

**In.** A run's ``input.messages``' last human message is a chat
:class:`~teamgraph.server.turns.Start`; ``command.resume`` is an
:class:`~teamgraph.server.turns.Answer` (a string, when the run asked a question) or a
:class:`~teamgraph.server.turns.Resume` — ``{"action": ...}`` for every call, or
``{<interrupt id>: {"action": ...}}``.

**Out.** Stream parts (``event``: the mode, ``data``: JSON, ``id``: the seq of the event they
came from), per requested ``stream_mode``:

- ``values``: the thread's state, ``{"messages": [...]}`` in LangChain's message form, when the run
  starts and when it ends — with ``__interrupt__`` when it paused;
- ``updates``: ``{<step or agent>: {"output": ...}}`` as each workflow step or agent finishes, and
  ``{"__interrupt__": [...]}`` when the run pauses;
- ``messages`` (``messages-tuple``): the answer's tokens as ``[message chunk, metadata]`` pairs;
- ``events``: every teamgraph event as ``{"event": <type>, "data": <event>}``;
- ``custom``: the run's progress lines (plan, steps, tool calls, handoffs).

An interrupt is ``{"value": ..., "id": ...}``: a clarifying question's value is the question; a
tool approval's is ``{"type": "tool_approval", "tool", "args", "agent"}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from teamgraph.errors import RunConflict, UsageError
from teamgraph.events import Event
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State, owned_or_404
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply, progress_line
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Answer,
    Intent,
    Opened,
    Resume,
    Start,
    open_turn,
    waiting_in,
)
from teamgraph.storage.models import RunRow, SessionRow

router = APIRouter(prefix="/langgraph", tags=["LangGraph Agent Protocol"])
MODES = ("values", "updates", "messages", "messages-tuple", "events", "custom", "debug")
QUESTION = "clarification"
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


def message(role: str, content: str, message_id: str) -> dict[str, Any]:
    """A chat message as LangChain serialises it."""
    kind = {"user": "human", "assistant": "ai", "system": "system"}.get(role, role)
    return {"type": kind, "content": content, "id": message_id, "additional_kwargs": {}}


def interrupt_value(pending: dict[str, Any]) -> dict[str, Any]:
    """One of ``Runner.pending``'s items as a LangGraph interrupt."""
    if pending["type"] == "clarification":
        return {"value": pending["question"], "id": f"{pending['interrupt_id']}:{QUESTION}"}
    value = {"type": "tool_approval", "tool": pending["tool"], "args": pending["args"]}
    return {"value": {**value, "agent": pending["agent"]}, "id": pending["id"]}


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
    if body.thread_id and await repo.claimed_session(db, body.thread_id) is not None:
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
    busy = state.runs.live_in(row.id) is not None
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
    waiting = await waiting_in(state, row.id)
    interrupts = [interrupt_value(p) for p in waiting.pending] if waiting else []
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
@router.post("/threads/{thread_id}/runs/stream", response_class=StreamingResponse)
async def stream_run(
    thread_id: str, body: RunIn, user: CurrentUser, state: State
) -> StreamingResponse:
    opened = await _open(state, user.id, thread_id, body)
    headers = {"Content-Location": f"/langgraph/threads/{thread_id}/runs/{opened.run_id}"}
    parts = StreamParts(state, opened, thread_id, _modes(body.stream_mode))
    return parts.response(headers)


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
    seq = last_event_id or ""
    after = int(seq) if seq.isascii() and seq.isdigit() and len(seq) < 10 else 0  # "¹": no seq
    opened = Opened(run_id, row.team_name, after)
    modes = _modes(stream_mode or ["values"])
    return StreamParts(state, opened, thread_id, modes, rejoined=after > 0).response()


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=status.HTTP_202_ACCEPTED)
async def cancel_run(thread_id: str, run_id: str, user: CurrentUser, state: State) -> None:
    await _run_of(state, user.id, thread_id, run_id)
    await state.runs.cancel(run_id)


async def _open(state: AppState, user_id: str, thread_id: str, body: RunIn) -> Opened:
    """Start the run the body asks for on the thread, or resume its paused run."""
    if body.assistant_id not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Assistant not found")
    row = await _owned(state, user_id, thread_id)
    binding = await _bind(state, row, body.assistant_id)
    if body.command and "resume" in body.command:
        intent = await _resume(state, row, body.command["resume"])
    else:
        text = _last_human((body.input or {}).get("messages", []))
        intent = Start(text, chat=True, also=binding)
    return await open_turn(state, intent, row, row.team)


async def _bind(state: AppState, row: SessionRow, team: str) -> list[Any]:
    """A thread runs one team: its first run's (a thread with runs on another is a 409). The
    statement that binds it goes in the run's own transaction."""
    if row.team == team:
        return []
    if await state.backend.runs.latest_in_session(row.id) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"thread runs assistant {row.team!r}")
    row.team = team
    return [repo.bind_team(row.id, team)]


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
    if isinstance(value, dict) and "action" in value:
        return Resume(run_id, default=value)
    if isinstance(value, dict):
        return Resume(run_id, decisions=value)
    raise UsageError("resume tool approvals with {'action': ...} or {id: {'action': ...}}")


Part = tuple[str, Any, int | None]  # (mode, data, id)


class StreamParts(EventStream[Part]):
    """Folds one execution's events into stream parts of the asked modes. ``rejoined``: a
    client reconnecting after ``Last-Event-ID`` gets no metadata and no first state again."""

    def __init__(
        self,
        state: AppState,
        turn: Opened,
        thread_id: str,
        modes: set[str],
        rejoined: bool = False,
    ) -> None:
        super().__init__(state, turn)
        self.thread_id, self.modes, self.rejoined = thread_id, set(modes), rejoined
        if "messages-tuple" in self.modes:
            self.modes.add("messages")
        pattern = state.teams[turn.team].spec.pattern if turn.team in state.teams else ""
        self.reply = ChatReply(pattern, separate=True)
        self.last = turn.after_seq  # the seq of the last event seen

    async def on_start(self) -> AsyncIterator[Part]:
        if self.rejoined:
            return
        yield "metadata", {"run_id": self.turn.run_id, "attempt": 1}, None
        if "values" in self.modes:
            yield "values", await _values(self.state, self.thread_id), self.turn.after_seq

    def on_event(self, event: Event) -> Iterable[Part]:
        self.last = event.seq
        return [(mode, data, event.seq) for mode, data in self._parts(event)]

    async def on_end(self) -> AsyncIterator[Part]:
        values = await _values(self.state, self.thread_id)
        if values.get("__interrupt__") and "updates" in self.modes:
            yield "updates", {"__interrupt__": values["__interrupt__"]}, self.last
        if "values" in self.modes:
            yield "values", values, self.last

    def encode(self, part: Part) -> str:
        mode, data, seq = part
        return frame(mode, json.dumps(data, ensure_ascii=False), seq)

    def _parts(self, event: Event) -> Iterable[tuple[str, Any]]:
        if "events" in self.modes:
            yield "events", {"event": event.type, "data": event.model_dump(mode="json")}
        if "custom" in self.modes and (line := progress_line(event)):
            yield "custom", line
        if "updates" in self.modes and (update := _update(event)):
            yield "updates", update
        kind, text = self.reply.piece(event)  # every event: the reply keeps its state
        answers = kind == "answer" and text and event.type != "clarification_requested"
        if answers and "messages" in self.modes:
            chunk = {"type": "AIMessageChunk", "content": text, "id": f"run-{self.turn.run_id}"}
            yield "messages", [chunk, {"langgraph_node": event.path[-1] if event.path else ""}]


def _update(event: Event) -> dict[str, Any] | None:
    if event.type == "step_completed":
        return {event.step_id: {"output": event.output, "worker": event.worker}}
    if event.type == "step_failed":
        return {event.step_id: {"error": event.error, "worker": event.worker}}
    if event.type == "agent_message" and len(event.path) == 2:
        return {event.agent: {"messages": [message("assistant", event.content, event.agent)]}}
    return None


async def _values(state: AppState, thread_id: str) -> dict[str, Any]:
    async with state.sessions() as db:
        row = await repo.claimed_session(db, thread_id)
    if row is None:  # deleted while the run was followed
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Thread not found")
    current = await _state(state, row)
    values: dict[str, Any] = dict(current["values"])
    if current["interrupts"]:
        values["__interrupt__"] = current["interrupts"]
    return values


async def _run_of(state: AppState, user_id: str, thread_id: str, run_id: str) -> RunRow:
    """The user's run ``run_id`` of thread ``thread_id`` — 404 otherwise (a run outlives its
    deleted thread in the runs table, not here)."""
    row = await state.backend.runs.owned(run_id, user_id)
    if row is None or row.session_id != thread_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
    await _owned(state, user_id, thread_id)
    return row


async def _run(state: AppState, run_id: str) -> dict[str, Any]:
    row = await state.backend.runs.get(run_id)
    live = state.runs.live_in(row.session_id or "")
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


def _modes(asked: str | list[str]) -> set[str]:
    modes = {asked} if isinstance(asked, str) else set(asked)
    unknown = modes - set(MODES)
    if unknown:
        raise UsageError(f"stream_mode: {sorted(unknown)} not supported; use {', '.join(MODES)}")
    return modes


def _iso(when: datetime) -> str:
    return when.isoformat()
