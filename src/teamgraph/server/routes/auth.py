"""Registration, login and sessions (paths compatible with the seeds' services)."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import OAuth2PasswordRequestForm
from pydantic import ValidationError

from teamgraph.server import repositories as repo
from teamgraph.server.cookies import clear_login_cookies, set_login_cookies
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
    form: Annotated[OAuth2PasswordRequestForm, Depends()],
    request: Request,
    response: Response,
    state: State,
    db: Db,
) -> Token:
    """OAuth2 password form (``username`` = email) → a bearer token, also set as an HttpOnly
    cookie for same-origin browser clients (with a CSRF cookie: see docs/api.md)."""
    user = await repo.user_by_email(db, form.username.lower())
    if user is None or not verify_password(form.password, user.password_hash):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="Incorrect email or password",
            headers={"WWW-Authenticate": "Bearer"},
        )
    token = _token(state, user.id)
    set_login_cookies(response, request, token.access_token, token.expires_at)
    return token


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(response: Response) -> None:
    """Forget the log-in cookies (a bearer token stays valid until it expires)."""
    clear_login_cookies(response)


@router.post("/reset-password")
async def reset_password(
    email: Annotated[str, Form()],
    new_password: Annotated[str, Form()],
    master_password: Annotated[str, Form()],
    state: State,
    db: Db,
) -> dict[str, str]:
    """Set a user's password with the master password (the seed's form fields); off — 404 —
    unless ``TEAMGRAPH_MASTER_PASSWORD`` is set. Rate-limited as log-in; never logged."""
    expected = state.settings.master_password
    if not expected:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Password reset is not enabled")
    if not hmac.compare_digest(master_password.encode(), expected.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="Invalid master password")
    try:
        password = Credentials(email=email, password=new_password).password
    except ValidationError as exc:
        errors = [{**e, "loc": ["body", *e["loc"]]} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None
    user = await repo.user_by_email(db, email.lower())
    if user is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="User not found")
    await repo.set_password(db, user, hash_password(password))
    return {"message": "Password reset successfully"}


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
    """The user's sessions, each with a session token of its own (as the seed's clients
    switch to an older session with it)."""
    rows = await repo.list_sessions(db, user.id)
    return [_session_out(state, row, with_token=True) for row in rows]


async def _new_name(request: Request) -> str:
    """The new name as JSON ``{"name"}`` or as the seed's form field ``name``."""
    if request.headers.get("content-type", "").startswith("application/json"):
        raw: Any = (await request.json() or {}).get("name")
    else:
        raw = (await request.form()).get("name")
    try:
        return SessionRename(name=raw).name
    except ValidationError as exc:
        detail = [{**e, "loc": ["body", "name"]} for e in exc.errors(include_url=False)]
        raise RequestValidationError(detail) from None


@router.patch(
    "/session/{session_id}/name",
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


@router.delete("/session/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(session: OwnedSession, db: Db) -> None:
    await repo.delete_session(db, session)


@router.post("/session/{session_id}/token", response_model=Token)
async def session_token(session: OwnedSession, state: State) -> Token:
    """A fresh session token for an existing session."""
    return _token(state, session.user_id, session.id)
