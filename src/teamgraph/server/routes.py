"""The core's own routes, one router per resource: accounts and API keys, sessions, teams, the
web workspace. (Runs are served by the protocol adapters, :mod:`teamgraph.server.protocols`.)"""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Form, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.security import OAuth2PasswordRequestForm
from pydantic import BaseModel, Field, ValidationError
from starlette.staticfiles import StaticFiles

from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates
from teamgraph.server import credentials
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, ManagingUser, OwnedSession, State
from teamgraph.server.schemas import (
    Credentials,
    MessageOut,
    SessionCreate,
    SessionOut,
    SessionRename,
    TeamOut,
    TemplateOut,
    Token,
    UserOut,
)
from teamgraph.server.state import AppState
from teamgraph.storage.models import ApiKeyRow, SessionRow
from teamgraph.ui import STATIC_DIR

# --- auth --------------------------------------------------------------------------------------
# Accounts: register, log in (a bearer token, and the log-in cookie for same-origin pages), log
# out, reset a password with the master password, and the user's API keys (``/api/v1/auth/…``,
# paths and shapes as the FastAPI agent template's clients call them).
auth_router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


def issue_token(state: AppState, user_id: str, session_id: str | None = None) -> Token:
    """A user token, or with ``session_id`` a session token (valid ``jwt_expiry_minutes``)."""
    settings = state.settings
    value, expires = credentials.create_token(
        settings.jwt_secret, user_id, settings.jwt_expiry_minutes, session_id
    )
    return Token(access_token=value, expires_at=expires)


@auth_router.post("/register", response_model=UserOut, status_code=status.HTTP_201_CREATED)
async def register(body: Credentials, state: State, db: Db) -> UserOut:
    """Create an account (password: 8–64 characters with upper, lower, digit and special)."""
    email = body.email.lower()
    if await repo.user_by_email(db, email) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="Email already registered")
    user = await repo.create_user(db, email, credentials.hash_password(body.password))
    return UserOut(id=user.id, email=user.email, token=issue_token(state, user.id))


@auth_router.post("/login", response_model=Token)
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
    if user is None or not credentials.verify_password(form.password, user.password_hash):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="Incorrect email or password",
            headers={"WWW-Authenticate": "Bearer"},
        )
    token = issue_token(state, user.id)
    credentials.set_login_cookies(response, request, token.access_token, token.expires_at)
    return token


@auth_router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(response: Response) -> None:
    """Forget the log-in cookies (a bearer token stays valid until it expires)."""
    credentials.clear_login_cookies(response)


@auth_router.post("/reset-password")
async def reset_password(
    email: Annotated[str, Form()],
    new_password: Annotated[str, Form()],
    master_password: Annotated[str, Form()],
    state: State,
    db: Db,
) -> dict[str, str]:
    """Set a user's password with the master password (the template's form fields); off — 404 —
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
    await repo.set_password(db, user, credentials.hash_password(password))
    return {"message": "Password reset successfully"}


# --- API keys ----------------------------------------------------------------------------------
class NewKeyIn(BaseModel):
    name: str = Field(default="", max_length=200, description="What the key is for.")


class KeyOut(BaseModel):
    id: str
    name: str
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    revoked_at: datetime | None = None


class NewKeyOut(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again.")


def _key_out(row: ApiKeyRow) -> KeyOut:
    return KeyOut(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


@auth_router.post("/api-keys", response_model=NewKeyOut, status_code=status.HTTP_201_CREATED)
async def create_key(body: NewKeyIn, user: CurrentUser, db: Db) -> NewKeyOut:
    """A key for the user (shown this once; only its SHA-256 is stored)."""
    made = await credentials.create_key(db, user.id, body.name)
    return NewKeyOut(**_key_out(made.row).model_dump(), key=made.key)


@auth_router.get("/api-keys", response_model=list[KeyOut])
async def list_keys(user: CurrentUser, db: Db) -> list[KeyOut]:
    """The user's keys, revoked ones too (without the keys)."""
    return [_key_out(row) for row in await credentials.owned_keys(db, user.id)]


@auth_router.delete("/api-keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: str, user: CurrentUser, state: State, db: Db) -> None:
    """Revoke a key: refused at once by this process, within ``API_KEY_CACHE_S`` by others."""
    key_hash = await credentials.revoke_key(db, user.id, key_id)
    if key_hash is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="API key not found")
    state.authenticator.forget(key_hash)


# --- teams -------------------------------------------------------------------------------------
# What the service can run: teams, their agents, workflow templates.
teams_router = APIRouter(prefix="/api/v1", tags=["teams"])


@teams_router.get("/teams", response_model=list[TeamOut])
async def list_teams(state: State, _user: CurrentUser) -> list[TeamOut]:
    return [
        TeamOut(
            name=name,
            description=team.spec.description,
            pattern=team.spec.pattern,
            members=[{"name": m.name, "description": m.description} for m in team.spec.members],
            budget=team.spec.budget.model_dump(exclude_none=True) or None,
        )
        for name, team in state.teams.items()
    ]


@teams_router.get("/teams/{team}/agents", response_model=list[dict[str, object]])
async def list_agents(team: str, state: State, _user: CurrentUser) -> list[dict[str, object]]:
    if team not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Team not found")
    return [m.model_dump(mode="json") for m in state.teams[team].spec.members]


@teams_router.get("/templates", response_model=list[TemplateOut])
async def list_templates(state: State, _user: CurrentUser) -> list[TemplateOut]:
    found = load_templates([BUILTIN_TEMPLATES_DIR, *state.settings.templates_dirs])
    return [TemplateOut(name=t.name, description=t.description) for t in found.values()]


# --- sessions ----------------------------------------------------------------------------------
# Sessions — a user's conversations, each on a team: create (with a session token), list, rename,
# delete, a fresh session token, and the session's messages. The ``/api/v1/auth/session`` paths
# and shapes are the FastAPI agent template's; the messages route is teamgraph's.
sessions_router = APIRouter(prefix="/api/v1", tags=["sessions"])


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


@sessions_router.post(
    "/auth/session", response_model=SessionOut, status_code=status.HTTP_201_CREATED
)
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


@sessions_router.get("/auth/sessions", response_model=list[SessionOut])
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


@sessions_router.patch(
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


@sessions_router.delete("/auth/session/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(session: OwnedSession, db: Db) -> None:
    await repo.delete_session(db, session)


@sessions_router.post("/auth/session/{session_id}/token", response_model=Token)
async def session_token(session: OwnedSession, state: State) -> Token:
    """A fresh session token for an existing session."""
    return issue_token(state, session.user_id, session.id)


@sessions_router.get("/sessions/{session_id}/messages", response_model=list[MessageOut])
async def session_messages(session: OwnedSession, db: Db) -> list[MessageOut]:
    """The session's messages, oldest first: the user's requests and answers to the team's
    questions, and each run's final answer (``run_id`` links a message to its run)."""
    return [
        MessageOut(role=m.role, content=m.content, run_id=m.run_id, created_at=m.created_at)
        for m in await repo.messages(db, session.id)
    ]


# --- web ---------------------------------------------------------------------------------------
# The web workspace: ``/`` serves its page, ``/ui/…`` its modules, under a strict CSP.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

web_router = APIRouter(include_in_schema=False)


@web_router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers=SECURITY_HEADERS)


class _SecuredFiles(StaticFiles):
    """The workspace's modules, with the page's security headers, revalidated on every load."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update({**SECURITY_HEADERS, "Cache-Control": "no-cache"})
        return response


def install_workspace(app: FastAPI) -> None:
    app.include_router(web_router)
    app.mount("/ui", _SecuredFiles(directory=STATIC_DIR), name="ui")
