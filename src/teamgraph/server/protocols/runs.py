"""teamgraph's own runs API: runs of a session's team — start, follow (server-sent events of
the typed events themselves, with replay), inspect, cancel, resume. Another user's run or session
is 404, like an unknown one.

The route every run goes through twice (start, then its event stream) is kept lean: no
dependency beyond the credential and the owned session, no read the answer does not need."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import suppress
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from teamgraph.errors import RunConflict
from teamgraph.events import Event, TokenUsage
from teamgraph.pauses import Decision
from teamgraph.result import StepResult
from teamgraph.server.deps import (
    Claims,
    CurrentUser,
    Db,
    ReadSession,
    State,
    check_scope,
    state_of,
)
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.run_manager import RunManager
from teamgraph.server.schemas import SafeText
from teamgraph.server.sse import frame
from teamgraph.server.turns import Opened, Resume, Start, open_turn
from teamgraph.storage.models import RunRow

MAX_SEQ = 2**31 - 1  # event seqs are 32-bit integers in the database

router = APIRouter(prefix="/api/v1", tags=["runs"])


# --- bodies ------------------------------------------------------------------------------------
class RunOptions(BaseModel):
    """Reserved for per-run options: none are defined yet, unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: SafeText = Field(min_length=1, max_length=20000, description="What the team should do.")
    template: SafeText | None = Field(
        default=None, max_length=200, description="Workflow template (default: the session's)."
    )
    options: RunOptions = Field(default_factory=RunOptions)

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be blank")
        return value


class RunAccepted(BaseModel):
    run_id: str
    status: str = Field(description="The run's status when the answer was sent.")


class RunDecision(Decision):
    """A decision on one tool call (``edit`` needs ``args``)."""

    comment: SafeText = Field(default="", max_length=2000, description="Shown to the agent.")


class RunResume(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: SafeText | None = Field(
        default=None, min_length=1, max_length=20000, description="Answer to the run's question."
    )
    decisions: dict[str, RunDecision] = Field(
        default_factory=dict, description="Decisions on tool calls, by approval request_id."
    )
    default: RunDecision | None = Field(
        default=None, description="The decision on every tool call without one in decisions."
    )


class RunSummary(BaseModel):
    run_id: str
    session_id: str | None
    team: str
    pattern: str
    status: str
    input: str
    template: str | None
    planner_tier: str | None
    error: str | None
    cost_usd: float
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class RunOut(RunSummary):
    thread_id: str
    output: str | None
    plan: dict[str, Any] | None = None
    steps: list[StepResult] = Field(default_factory=list)
    usage: TokenUsage
    usage_by_agent: dict[str, TokenUsage] = Field(default_factory=dict)


class PendingItem(BaseModel):
    """What a paused run waits for: an answer to a question, or a decision on a tool call."""

    run_id: str
    session_id: str | None
    type: Literal["clarification", "approval"]
    interrupt_id: str
    question: str | None = None
    request_id: str | None = Field(default=None, description="The key of its decision on resume.")
    agent: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    call_id: str | None = None
    step_id: str | None = None


# --- the event stream --------------------------------------------------------------------------
class RunEvents(EventStream[Event]):
    """The run's events as they are: ``id`` its seq, ``event`` its type, ``data`` its JSON
    (made once per event, for its row and its frame)."""

    def on_event(self, event: Event) -> Iterable[Event]:
        return (event,)

    def encode(self, frame_: Event) -> str:
        return frame(frame_.type, frame_.encoded, frame_.seq)

    def encode_batch(self, events: Sequence[Event]) -> str:
        return "".join([frame(e.type, e.encoded, e.seq) for e in events])


# --- routes ------------------------------------------------------------------------------------
async def get_manager(state: State) -> RunManager:  # async: no threadpool hop
    return state.runs


Manager = Annotated[RunManager, Depends(get_manager)]


async def run_of(run_id: str, claims: Claims, state: State) -> RunRow:
    """A run in the path that the token's user owns — 404 otherwise (never leaks existence); a
    session token's: a run of its own session only (403)."""
    row = await state.backend.runs.owned(run_id, claims.user_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
    check_scope(claims, row.session_id)
    return row


OwnedRun = Annotated[RunRow, Depends(run_of)]


def _summary(row: RunRow) -> dict[str, Any]:
    return {
        "run_id": row.id,
        "session_id": row.session_id,
        "team": row.team_name,
        **{k: getattr(row, k) for k in RunSummary.model_fields if hasattr(RunRow, k)},
    }


@router.post(
    "/sessions/{session_id}/runs", response_model=RunAccepted, status_code=status.HTTP_202_ACCEPTED
)
async def start_run(session: ReadSession, body: RunCreate, request: Request) -> RunAccepted:
    """Start a run of the session's team on the session's thread; follow it on ``events``. The
    answer comes once the run is stored and its first event (``run_started``) can be read."""
    state = state_of(request)
    start = Start(body.input, body.template or session.template)
    opened = await open_turn(state, start, session, session.team)  # a RunConflict answers 409
    return RunAccepted(run_id=opened.run_id, status=state.runs.accepted)


@router.get("/sessions/{session_id}/runs", response_model=list[RunSummary])
async def list_runs(
    session: ReadSession, state: State, limit: Annotated[int, Query(ge=1, le=200)] = 50
) -> list[RunSummary]:
    """The session's runs, newest first."""
    rows = await state.backend.runs.list(limit, session_id=session.id, user_id=session.user_id)
    return [RunSummary(**_summary(row)) for row in rows]


@router.get("/runs/{run_id}", response_model=RunOut)
async def get_run(run: OwnedRun, manager: Manager) -> RunOut:
    """Status, plan, steps, usage and cost of a run (finished or not)."""
    tokens = {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens}
    result: dict[str, Any] = {"usage": {**tokens, "cost_usd": run.cost_usd}}
    with suppress(RunConflict):  # unless its team is no longer served: what the run table knows
        result = (await manager.runner(run.team_name).result(run.id)).model_dump()
    keep = {"plan", "steps", "usage", "usage_by_agent"}
    extra = {k: v for k, v in result.items() if k in keep}
    return RunOut(**_summary(run), thread_id=run.thread_id, output=run.output, **extra)


@router.get("/runs/{run_id}/events", response_class=StreamingResponse)
async def run_events(
    run_id: str,
    claims: Claims,
    request: Request,
    after: Annotated[
        int, Query(ge=0, le=MAX_SEQ, description="Only events with a greater seq.")
    ] = 0,
    last_event_id: Annotated[str | None, Header(description="Set by reconnecting clients.")] = None,
) -> StreamingResponse:
    """Server-sent events (``id``: seq, ``event``: type, ``data``: the event as JSON): the stored
    ones, then live ones; the stream ends when the run ends or pauses. ``Last-Event-ID`` (it
    wins over ``after``) resumes a stream where it broke; a finished run replays from the start.
    A run executing in this process is streamed from memory (its events are stored in batches);
    the events ready at once go out in one write."""
    state = state_of(request)
    owner = state.runs.owner(run_id)
    if owner is None or claims.session_id is not None:  # a session token: its session's runs
        await run_of(run_id, claims, state)
    elif owner != claims.user_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
    if last_event_id is not None:
        seq = last_event_id.strip()
        if not (seq.isascii() and seq.isdigit()) or int(seq) > MAX_SEQ:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, detail="Last-Event-ID must be an event seq"
            )
        after = int(last_event_id)
    return RunEvents(state, Opened(run_id, None, after)).response()


@router.post("/runs/{run_id}/cancel", response_model=RunAccepted)
async def cancel_run(run: OwnedRun, manager: Manager, db: Db) -> RunAccepted:
    """Stop a running run (it ends ``cancelled`` and can be resumed) or close a paused one."""
    await db.close()  # give the connection back: the run's last writes need the pool
    return RunAccepted(run_id=run.id, status=await manager.cancel(run.id))


@router.post(
    "/runs/{run_id}/resume", response_model=RunAccepted, status_code=status.HTTP_202_ACCEPTED
)
async def resume_run(
    run: OwnedRun, state: State, db: Db, body: RunResume | None = None
) -> RunAccepted:
    """Continue a paused run with the ``answer`` to its question or ``decisions`` on its tool
    calls (``default`` for the rest); a cancelled or interrupted run needs neither."""
    body = body or RunResume()
    await db.close()  # give the connection back: resuming a run needs the pool
    resume = Resume(run.id, body.answer, body.decisions, body.default)
    await open_turn(state, resume)
    return RunAccepted(run_id=run.id, status=(await state.backend.runs.get(run.id)).status)


@router.get("/runs/{run_id}/pending", response_model=list[PendingItem])
async def run_pending(run: OwnedRun, manager: Manager) -> list[PendingItem]:
    """The questions and tool calls a paused run waits for (empty unless paused)."""
    return await _pending(manager, run)


@router.get("/pending", response_model=list[PendingItem])
async def all_pending(user: CurrentUser, state: State, manager: Manager) -> list[PendingItem]:
    """Everything the user's paused runs wait for, newest run first."""
    rows = await state.backend.runs.list(100, user_id=user.id, status="interrupted")
    return [item for row in rows for item in await _pending(manager, row)]


async def _pending(manager: RunManager, row: RunRow) -> list[PendingItem]:
    if row.status != "interrupted":
        return []
    try:
        requests = await manager.runner(row.team_name).pending(row.id)
    except RunConflict:
        return []
    return [
        PendingItem(
            run_id=row.id,
            session_id=row.session_id,
            request_id=r.get("id"),
            **{k: v for k, v in r.items() if k != "id"},
        )
        for r in requests
    ]
