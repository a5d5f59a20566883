"""Runs of a session's team: start, follow (SSE with replay), inspect, cancel, resume. Another
user's run or session is 404, like an unknown one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, status
from sse_starlette import EventSourceResponse

from teamgraph.errors import RunConflict
from teamgraph.server.deps import Claims, CurrentUser, Db, ReadSession, State, state_of
from teamgraph.server.runs import RunManager
from teamgraph.server.schemas import (
    PendingItem,
    RunAccepted,
    RunCreate,
    RunOut,
    RunResume,
    RunSummary,
)
from teamgraph.server.sse import frame
from teamgraph.storage.models import RunRow

MAX_SEQ = 2**31 - 1  # event seqs are 32-bit integers in the database

router = APIRouter(prefix="/api/v1", tags=["runs"])


async def get_manager(state: State) -> RunManager:  # async: no threadpool hop
    return state.runs


Manager = Annotated[RunManager, Depends(get_manager)]


async def run_of(run_id: str, claims: Claims, state: State) -> RunRow:
    """A run in the path that the token's user owns — 404 otherwise (never leaks existence)."""
    row = await state.backend.runs.owned(run_id, claims.user_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
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
    manager = state_of(request).runs
    run_id = await manager.start(  # a RunConflict answers 409 (server.errors)
        session.user_id, session, session.team, body.input, body.template or session.template
    )
    return RunAccepted(run_id=run_id, status=manager.accepted)


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


@router.get("/runs/{run_id}/events", response_class=EventSourceResponse)
async def run_events(
    run_id: str,
    claims: Claims,
    request: Request,
    after: Annotated[
        int, Query(ge=0, le=MAX_SEQ, description="Only events with a greater seq.")
    ] = 0,
    last_event_id: Annotated[str | None, Header(description="Set by reconnecting clients.")] = None,
) -> EventSourceResponse:
    """Server-sent events (``id``: seq, ``event``: type, ``data``: the event as JSON): the stored
    ones, then live ones; the stream ends when the run ends or pauses. ``Last-Event-ID`` (it
    wins over ``after``) resumes a stream where it broke; a finished run replays from the start.
    A run executing in this process is streamed from memory (its events are stored in batches);
    the events ready at once go out in one write."""
    state = state_of(request)
    manager = state.runs
    owner = manager.owner(run_id)
    if owner is None:
        await run_of(run_id, claims, state)
    elif owner != claims.user_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Run not found")
    if last_event_id is not None:
        if not last_event_id.strip().isdigit() or int(last_event_id) > MAX_SEQ:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, detail="Last-Event-ID must be an event seq"
            )
        after = int(last_event_id)

    async def stream() -> AsyncIterator[bytes]:
        async for batch in manager.batches(run_id, after):  # what was ready: one write
            yield "".join([frame(e.type, e.encoded, e.seq) for e in batch]).encode()

    return EventSourceResponse(stream())


@router.post("/runs/{run_id}/cancel", response_model=RunAccepted)
async def cancel_run(run: OwnedRun, manager: Manager, db: Db) -> RunAccepted:
    """Stop a running run (it ends ``cancelled`` and can be resumed) or close a paused one."""
    await db.close()  # give the connection back: the run's last writes need the pool
    return RunAccepted(run_id=run.id, status=await manager.cancel(run.id))


@router.post(
    "/runs/{run_id}/resume", response_model=RunAccepted, status_code=status.HTTP_202_ACCEPTED
)
async def resume_run(
    run: OwnedRun, manager: Manager, state: State, db: Db, body: RunResume | None = None
) -> RunAccepted:
    """Continue a paused run with the ``answer`` to its question or ``decisions`` on its tool
    calls (``default`` for the rest); a cancelled or interrupted run needs neither."""
    body = body or RunResume()
    await db.close()  # give the connection back: resuming a run needs the pool
    await manager.resume(run.id, body.answer, decisions=body.decisions, default=body.default)
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
