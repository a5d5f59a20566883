"""swarm-ai-chat's session routes (``/api/sessions``), as its client calls them: list (with
``search``), create from agent ids, update, delete, and a session's messages — each wrapped in
``{"success": true, "data": …}`` and owner-scoped (another user's session is a 404)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, ManagingUser, OwnedSession, State
from teamgraph.server.schemas import SafeText
from teamgraph.server.state import AppState
from teamgraph.storage.models import MessageRow, RunRow, SessionRow, UserRow

router = APIRouter(prefix="/api/sessions", tags=["swarm-ai-chat"])


class SessionIn(BaseModel):
    """The client's camelCase fields; ``team`` (teamgraph's) picks the team outright."""

    title: SafeText | None = Field(default=None, max_length=200)
    agentIds: list[SafeText] = Field(default_factory=list, max_length=50)
    primaryAgentId: SafeText | None = Field(default=None, max_length=200)
    team: SafeText | None = Field(default=None, max_length=200)


class SessionUpdate(BaseModel):
    """What can change; the client's other fields (participants, counts, …) are ignored."""

    title: SafeText | None = Field(default=None, max_length=200)
    primaryAgentId: SafeText | None = Field(default=None, max_length=200)


@router.get("")
async def list_sessions(
    user: ManagingUser,
    state: State,
    db: Db,
    search: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    rows = await repo.list_sessions(db, user.id)
    if search:
        rows = [r for r in rows if search.lower() in (r.name or "").lower()]
    data = await _described(state, db, user, rows)
    return {"success": True, "data": data, "count": len(data)}


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_session(
    body: SessionIn, user: ManagingUser, state: State, db: Db
) -> dict[str, Any]:
    """A session on ``team``, else on the served team that has every agent in ``agentIds``
    (422 naming them when none has)."""
    team = body.team or _team_with(state, body.agentIds)
    if team not in _served(state):
        raise _unprocessable(f"Unknown team {team!r}; teams: {', '.join(_served(state))}")
    primary = body.primaryAgentId or (body.agentIds[0] if len(body.agentIds) == 1 else None)
    _check_member(state, team, primary)
    row = await repo.create_session(
        db, user.id, name=body.title or "New Session", team=team, primary_agent=primary
    )
    return {"success": True, "data": (await _described(state, db, user, [row]))[0]}


@router.patch("/{session_id}")
async def update_session(
    body: SessionUpdate, session: OwnedSession, user: CurrentUser, state: State, db: Db
) -> dict[str, Any]:
    _check_member(state, session.team, body.primaryAgentId)
    if body.title:
        await repo.rename_session(db, session, body.title)
    if body.primaryAgentId:
        session.primary_agent = body.primaryAgentId
        await db.commit()
    return {"success": True, "data": (await _described(state, db, user, [session]))[0]}


@router.delete("/{session_id}")
async def delete_session(session: OwnedSession, db: Db) -> dict[str, Any]:
    await repo.delete_session(db, session)
    return {"success": True, "message": "Session deleted successfully"}


@router.get("/{session_id}/messages")
async def session_messages(
    session: OwnedSession,
    state: State,
    db: Db,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
    before: datetime | None = None,
    after: datetime | None = None,
) -> dict[str, Any]:
    """Oldest first; each run's tokens and cost are on its last assistant message."""
    rows, total = await repo.messages_page(db, session.id, limit, offset, before, after)
    run_ids = {r.run_id for r in rows if r.run_id}
    billed = await repo.billed_messages(db, state.backend.runs, session.id, run_ids)
    data = [_message(session, r, billed.get(r.id)) for r in rows]
    more = offset + limit < total
    return {
        "success": True,
        "data": data,
        "pagination": {"limit": limit, "offset": offset, "total": total, "hasMore": more},
    }


def _message(session: SessionRow, row: MessageRow, run: RunRow | None) -> dict[str, Any]:
    user = row.role == "user"
    return {
        "id": str(row.id),
        "sessionId": session.id,
        "senderType": "user" if user else "agent" if row.role == "assistant" else "system",
        "senderId": session.user_id if user else session.team,
        "content": row.content,
        "contentType": "text",
        "status": "sent",
        "metadata": {"runId": row.run_id} if row.run_id else {},
        "tokenCount": (run.input_tokens + run.output_tokens) if run else 0,
        "processingTime": _elapsed(run),
        "cost": run.cost_usd if run else 0.0,
        "createdAt": row.created_at.isoformat(),
    }


def _elapsed(run: RunRow | None) -> float:
    if run is None or run.finished_at is None:
        return 0.0
    return round((run.finished_at - run.created_at).total_seconds() * 1000)


async def _described(
    state: AppState, db: AsyncSession, user: UserRow, rows: list[SessionRow]
) -> list[dict[str, Any]]:
    totals = await repo.session_totals(db, state.backend.runs, [r.id for r in rows])
    return [_session(state, user, r, totals[r.id]) for r in rows]


def _session(
    state: AppState, user: UserRow, row: SessionRow, totals: repo.SessionTotals
) -> dict[str, Any]:
    team = state.teams.get(row.team)
    members = [(m.name, m.description) for m in team.spec.members] if team else []
    agents = {name: _agent(name, text) for name, text in members}
    owner = {"id": user.id, "username": user.email.split("@")[0], "avatarUrl": None}
    pattern = team.spec.pattern if team else ""
    kind = "DIRECT" if row.primary_agent or len(members) == 1 else "GROUP"
    return {
        "id": row.id,
        "title": row.name or "New Session",
        "description": team.spec.description if team else None,
        "type": "WORKFLOW" if kind == "GROUP" and pattern == "workflow" else kind,
        "status": "ACTIVE",
        "createdById": user.id,
        "primaryAgentId": row.primary_agent,
        "primaryAgent": agents.get(row.primary_agent or ""),
        "team": row.team,
        "isPublic": False,
        "isTemplate": False,
        "isPinned": False,
        "isArchived": False,
        "messageCount": totals.messages,
        "totalCost": totals.cost_usd,
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat(),
        "participants": [
            {"role": "OWNER", "isActive": True, "user": owner, "agent": None},
            *(
                {
                    "role": "ADMIN" if n == row.primary_agent else "PARTICIPANT",
                    "isActive": True,
                    "user": None,
                    "agent": a,
                }
                for n, a in agents.items()
            ),
        ],
    }


def _agent(name: str, description: str) -> dict[str, Any]:
    return {
        "id": name,
        "name": name,
        "description": description,
        "avatar": None,
        "avatarStyle": None,
    }


def _served(state: AppState) -> list[str]:
    """The teams a user may start a session on (not the ones derived per chat)."""
    return [name for name in state.teams if ":" not in name]


def _team_with(state: AppState, agents: list[str]) -> str:
    served = _served(state)
    if not agents:
        return served[0]
    fits = [n for n in served if set(agents) <= {m.name for m in state.teams[n].spec.members}]
    if not fits:
        known = sorted({m.name for n in served for m in state.teams[n].spec.members})
        raise _unprocessable(
            f"No team has every agent of agentIds {agents}; agents: {', '.join(known)}"
        )
    return min(fits, key=lambda n: len(state.teams[n].spec.members))  # the closest fit


def _check_member(state: AppState, team: str, agent: str | None) -> None:
    names = [m.name for m in state.teams[team].spec.members]
    if agent is not None and agent not in names:
        raise _unprocessable(
            f"primaryAgentId {agent!r} is not a member of team {team!r}: {', '.join(names)}"
        )


def _unprocessable(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)
