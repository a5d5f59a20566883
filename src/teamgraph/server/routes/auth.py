"""Registration, login and sessions (paths compatible with the seeds' services)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status
from fastapi.security import OAuth2PasswordRequestForm

from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, OwnedSession, State
from teamgraph.server.schemas import (
    Credentials,
    SessionCreate,
    SessionOut,
    SessionRename,
    Token,
    UserOut,
)
from teamgraph.server.security import create_token, hash_password, verify_password
from teamgraph.server.state import AppState
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


def _token(state: AppState, user_id: str, session_id: str | None = None) -> Token:
    settings = state.settings
    value, expires = create_token(
        settings.jwt_secret, user_id, settings.jwt_expiry_minutes, session_id
    )
    return Token(access_token=value, expires_at=expires)


def _session_out(state: AppState, row: SessionRow, with_token: bool = False) -> SessionOut:
    token = _token(state, row.user_id, row.id) if with_token else None
    return SessionOut(
        session_id=row.id,
        name=row.name,
        team=row.team,
        template=row.template,
        token=token,
        created_at=row.created_at,
    )


@router.post("/register", response_model=UserOut, status_code=status.HTTP_201_CREATED)
async def register(body: Credentials, state: State, db: Db) -> UserOut:
    """Create an account (password: 8–64 characters with upper, lower, digit and special)."""
    email = body.email.lower()
    if await repo.user_by_email(db, email) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="Email already registered")
    user = await repo.create_user(db, email, hash_password(body.password))
    return UserOut(id=user.id, email=user.email, token=_token(state, user.id))


@router.post("/login", response_model=Token)
async def login(
    form: Annotated[OAuth2PasswordRequestForm, Depends()], state: State, db: Db
) -> Token:
    """OAuth2 password form (``username`` = email) → a bearer token."""
    user = await repo.user_by_email(db, form.username.lower())
    if user is None or not verify_password(form.password, user.password_hash):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="Incorrect email or password",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return _token(state, user.id)


@router.post("/session", response_model=SessionOut, status_code=status.HTTP_201_CREATED)
async def create_session(
    user: CurrentUser, state: State, db: Db, body: SessionCreate | None = None
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


@router.get("/sessions", response_model=list[SessionOut])
async def list_sessions(user: CurrentUser, state: State, db: Db) -> list[SessionOut]:
    return [_session_out(state, row) for row in await repo.list_sessions(db, user.id)]


@router.patch("/session/{session_id}/name", response_model=SessionOut)
async def rename_session(
    session: OwnedSession, body: SessionRename, state: State, db: Db
) -> SessionOut:
    return _session_out(state, await repo.rename_session(db, session, body.name))


@router.delete("/session/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(session: OwnedSession, db: Db) -> None:
    await repo.delete_session(db, session)


@router.post("/session/{session_id}/token", response_model=Token)
async def session_token(session: OwnedSession, state: State) -> Token:
    """A fresh session token for an existing session."""
    return _token(state, session.user_id, session.id)
