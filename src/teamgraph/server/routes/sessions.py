"""Sessions — a user's conversations, each on a team: create (with a session token), list,
rename, delete, a fresh session token, and the session's messages. The ``/api/v1/auth/session``
paths and shapes are the FastAPI agent template's; the messages route is teamgraph's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from teamgraph.server import repositories as repo
from teamgraph.server.deps import Db, ManagingUser, OwnedSession, State
from teamgraph.server.routes.auth import issue_token
from teamgraph.server.schemas import MessageOut, SessionCreate, SessionOut, SessionRename, Token
from teamgraph.server.state import AppState
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/api/v1", tags=["sessions"])


def _session_out(state: AppState, row: SessionRow, with_token: bool = False) -> SessionOut:
    token = issue_token(state, row.user_id, row.id) if with_token else None
    return SessionOut(
        session_id=row.id,
        name=row.name,
        team=row.team,
        template=row.template,
        token=token,
        created_at=row.created_at,
    )


@router.post("/auth/session", response_model=SessionOut, status_code=status.HTTP_201_CREATED)
async def create_session(
    user: ManagingUser, state: State, db: Db, body: SessionCreate | None = None
) -> SessionOut:
    """A new conversation on a team; the answer carries a session token for the chat routes."""
    body = body or SessionCreate()
    team = body.team or next(iter(state.teams))
    if team not in state.teams:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail=f"Unknown team {team!r}; teams: {', '.join(state.teams)}",
        )
    row = await repo.create_session(db, user.id, name=body.name, team=team, template=body.template)
    return _session_out(state, row, with_token=True)


@router.get("/auth/sessions", response_model=list[SessionOut])
async def list_sessions(user: ManagingUser, state: State, db: Db) -> list[SessionOut]:
    """The user's sessions, each with a session token of its own (as the template's clients
    switch to an older session with it)."""
    rows = await repo.list_sessions(db, user.id)
    return [_session_out(state, row, with_token=True) for row in rows]


async def _new_name(request: Request) -> str:
    """The new name as JSON ``{"name"}`` or as the template's form field ``name``."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            sent: Any = await request.json()
        except ValueError as exc:  # not JSON (or empty)
            loc, message = ["body"], f"Invalid JSON: {exc}"
            error = {"type": "json_invalid", "loc": loc, "msg": message}
            raise RequestValidationError([error]) from None
        if not isinstance(sent, dict):
            message = 'Input should be an object: {"name": "..."}'
            loc = ["body"]
            raise RequestValidationError([{"type": "dict_type", "loc": loc, "msg": message}])
        raw: Any = sent.get("name")
    else:
        raw = (await request.form()).get("name")
    try:
        return SessionRename(name=raw).name
    except ValidationError as exc:
        detail = [{**e, "loc": ["body", "name"]} for e in exc.errors(include_url=False)]
        raise RequestValidationError(detail) from None


@router.patch(
    "/auth/session/{session_id}/name",
    response_model=SessionOut,
    openapi_extra={
        "requestBody": {
            "content": {
                "application/json": {"schema": SessionRename.model_json_schema()},
                "application/x-www-form-urlencoded": {"schema": SessionRename.model_json_schema()},
            },
            "required": True,
        }
    },
)
async def rename_session(
    session: OwnedSession, name: Annotated[str, Depends(_new_name)], state: State, db: Db
) -> SessionOut:
    """Rename a session (JSON ``{"name"}`` or the form field ``name``; a user's or the
    session's own token)."""
    return _session_out(state, await repo.rename_session(db, session, name), with_token=True)


@router.delete("/auth/session/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(session: OwnedSession, db: Db) -> None:
    await repo.delete_session(db, session)


@router.post("/auth/session/{session_id}/token", response_model=Token)
async def session_token(session: OwnedSession, state: State) -> Token:
    """A fresh session token for an existing session."""
    return issue_token(state, session.user_id, session.id)


@router.get("/sessions/{session_id}/messages", response_model=list[MessageOut])
async def session_messages(session: OwnedSession, db: Db) -> list[MessageOut]:
    """The session's messages, oldest first: the user's requests and answers to the team's
    questions, and each run's final answer (``run_id`` links a message to its run)."""
    return [
        MessageOut(role=m.role, content=m.content, run_id=m.run_id, created_at=m.created_at)
        for m in await repo.messages(db, session.id)
    ]
