"""``/api/v1/approvals`` — the template's approvals page: the tool calls a session's paused run
waits for, decided one by one (session token). Each decision is kept in the run's journal (through
the runner); when every call of the pause has one, the decisions are a
:class:`~teamgraph.server.turns.Resume` of the run, which goes on in the background — its answer
joins the chat history."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, Field

from teamgraph.errors import RunConflict
from teamgraph.pauses import Decision
from teamgraph.server.deps import CurrentSession, State
from teamgraph.server.state import AppState
from teamgraph.server.turns import Resume, open_turn, waiting_in
from teamgraph.storage.models import RunRow, SessionRow, utcnow

router = APIRouter(prefix="/api/v1/approvals", tags=["FastAPI agent template: approvals"])
SHOWN_VALID_FOR = timedelta(days=7)  # the template's shape has an expiry; ours never expire
Status = Literal["pending", "approved", "rejected"]


class ApprovalAction(BaseModel):
    comment: str | None = Field(default=None, max_length=2000)


class ApprovalOut(BaseModel):
    """A tool call waiting for (or given) a decision, in the template's shape."""

    id: str
    session_id: str
    user_id: str | None
    action_type: str  # the tool
    action_description: str
    action_data: dict[str, Any]  # the tool's arguments
    status: Status
    created_at: datetime
    resolved_at: datetime | None = None
    reviewer_comment: str | None = None
    expires_at: datetime


class ApprovalList(BaseModel):
    requests: list[ApprovalOut]
    total: int


async def _approvals(
    state: AppState, session: SessionRow
) -> tuple[RunRow | None, dict[str, ApprovalOut]]:
    """The session's paused run and its tool calls (by their own request id), each with the
    decision kept so far."""
    waiting = await waiting_in(state, session.id)
    if waiting is None:
        return None, {}
    run, calls = waiting.run, waiting.approvals
    runner = state.runs.runner(run.team_name)
    decided = await runner.kept_decisions(run.id, [c["id"] for c in calls])
    return run, {c["id"]: _shown(run, c, decided.get(c["id"])) for c in calls}


def public_id(request_id: str) -> str:
    """A URL-safe id for a tool call's request id (which holds its step path, slashes
    included: the template's client puts the id in the path as it is)."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


def _shown(run: RunRow, call: dict[str, Any], decision: dict[str, Any] | None) -> ApprovalOut:
    state: Status = "pending"
    if decision is not None:
        state = "rejected" if decision["action"] == "reject" else "approved"
    return ApprovalOut(
        id=public_id(call["id"]),
        session_id=run.session_id or run.thread_id,
        user_id=run.user_id,
        action_type=call["tool"],
        action_description=f"{call['agent']} wants to call {call['tool']}",
        action_data=call["args"],
        status=state,
        created_at=run.updated_at,
        resolved_at=decision.get("at") if decision else None,
        reviewer_comment=decision.get("comment") if decision else None,
        expires_at=run.updated_at + SHOWN_VALID_FOR,
    )


@router.get("/pending", response_model=ApprovalList)
async def pending(session: CurrentSession, state: State) -> ApprovalList:
    _, shown = await _approvals(state, session)
    waiting = [a for a in shown.values() if a.status == "pending"]
    return ApprovalList(requests=waiting, total=len(waiting))


async def _one(
    state: AppState, session: SessionRow, shown_id: str
) -> tuple[RunRow, str, ApprovalOut]:
    """The run, the tool call's own request id and how it is shown, for an id of the URL."""
    run, shown = await _approvals(state, session)
    found = next(((k, a) for k, a in shown.items() if a.id == shown_id), None)
    if run is None or found is None:  # unknown, decided and resumed, or another session's
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Approval request not found")
    return run, *found


@router.get("/{request_id}", response_model=ApprovalOut)
async def one(request_id: str, session: CurrentSession, state: State) -> ApprovalOut:
    return (await _one(state, session, request_id))[2]


@router.post("/{request_id}/approve", response_model=ApprovalOut)
async def approve(
    request_id: str, session: CurrentSession, state: State, body: ApprovalAction | None = None
) -> ApprovalOut:
    return await _decide(state, session, request_id, "approve", body or ApprovalAction())


@router.post("/{request_id}/reject", response_model=ApprovalOut)
async def reject(
    request_id: str, session: CurrentSession, state: State, body: ApprovalAction | None = None
) -> ApprovalOut:
    return await _decide(state, session, request_id, "reject", body or ApprovalAction())


async def _decide(
    state: AppState,
    session: SessionRow,
    request_id: str,
    action: Literal["approve", "reject"],
    body: ApprovalAction,
) -> ApprovalOut:
    run, call_id, found = await _one(state, session, request_id)
    if found.status != "pending":
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"already {found.status}")
    decision = Decision.approve() if action == "approve" else Decision.reject(body.comment or "")
    runner = state.runs.runner(run.team_name)
    kept = {**decision.model_dump(), "comment": body.comment, "at": utcnow().isoformat()}
    await runner.keep_decision(run.id, call_id, kept)
    _, shown = await _approvals(state, session)
    if all(a.status != "pending" for a in shown.values()):  # decided: the run goes on
        decided = await runner.kept_decisions(run.id, list(shown))
        choices = {
            k: Decision(action=v["action"], comment=v.get("comment") or "")
            for k, v in decided.items()
        }
        with contextlib.suppress(RunConflict):  # another decision resumed it a moment ago
            await open_turn(state, Resume(run.id, decisions=choices))
    return shown[call_id]
