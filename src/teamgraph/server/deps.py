"""Request dependencies: the app state, a database session, the authenticated user/session.

Whom a request authenticates as is read by :mod:`teamgraph.server.credentials` (bearer token,
``x-api-key`` or the log-in cookie), as the rate limiter reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import OAuth2PasswordBearer
from sqlalchemy import Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.server import repositories as repo
from teamgraph.server.credentials import (
    TokenClaims,
    check_csrf,
    is_api_key,
    presented,
    token_problem,
)
from teamgraph.server.state import AppState
from teamgraph.storage.models import SessionRow, UserRow

T = TypeVar("T")

# How the OpenAPI schema describes the credential (app.py marks the routes that need one): the
# routes do not depend on it — each dependency costs FastAPI ≈ 10 µs a request to solve.
OAUTH2 = OAuth2PasswordBearer(tokenUrl="/api/v1/auth/login", auto_error=False)


def state_of(request: Request) -> AppState:
    """The app's state. The routes every run goes through take it from their ``Request``
    rather than as a dependency of their dependencies (≈ 10 µs a dependency, measured)."""
    state: AppState = request.app.state.teamgraph
    return state


async def get_state(request: Request) -> AppState:  # async: no threadpool hop
    return state_of(request)


async def get_db(state: Annotated[AppState, Depends(get_state)]) -> AsyncIterator[AsyncSession]:
    async with state.sessions() as db:
        yield db


State = Annotated[AppState, Depends(get_state)]
Db = Annotated[AsyncSession, Depends(get_db)]


def _unauthorized(detail: str = "Invalid or expired token") -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail=detail, headers={"WWW-Authenticate": "Bearer"}
    )


async def get_claims(request: Request) -> TokenClaims:
    """Whom the request's credential authenticates (401 otherwise); a request authenticated
    by the log-in cookie alone is CSRF-checked."""
    state = state_of(request)
    found = presented(request.scope)
    if found is None:
        raise _unauthorized("Not authenticated")
    if found.source == "cookie":
        check_csrf(request, state.settings.cors_origins)
    claims = await state.authenticator.claims(found.token)
    if claims is None and is_api_key(found.token):
        raise _unauthorized("Invalid or revoked API key")
    if claims is None:
        raise _unauthorized(token_problem(state.settings.jwt_secret, found.token))
    return claims


Claims = Annotated[TokenClaims, Depends(get_claims)]
_USER = select(UserRow).where(UserRow.id == bindparam("user_id"))


async def current_user(claims: Claims, state: State) -> UserRow:
    """The token's user (read directly: no database session is held for it; do not change it)."""
    user = await state.backend.direct.first(_USER, user_id=claims.user_id)
    if user is None:
        raise _unauthorized()
    return user


CurrentUser = Annotated[UserRow, Depends(current_user)]


def _session_token(claims: TokenClaims, wants: str) -> HTTPException:
    return HTTPException(
        status.HTTP_403_FORBIDDEN,
        detail=f"This session token acts on its own session ({claims.session_id}) only: "
        f"{wants} needs the user's token",
    )


async def managing_user(claims: Claims, user: CurrentUser) -> UserRow:
    """The user of a user's token (or API key): listing and creating sessions is the user's,
    never a session token's (403)."""
    if claims.session_id is not None:
        raise _session_token(claims, "managing sessions")
    return user


ManagingUser = Annotated[UserRow, Depends(managing_user)]


def check_scope(claims: TokenClaims, session_id: str | None) -> None:
    """A session token acts on its own session only: 403 for any other (before any lookup, so
    the answer says nothing of whether that session exists)."""
    if claims.session_id is not None and claims.session_id != session_id:
        raise _session_token(claims, f"session {session_id}")


async def current_session(claims: Claims, user: CurrentUser, db: Db) -> SessionRow:
    """The session of a session token (``POST /api/v1/auth/session``), as the FastAPI agent
    template's chat routes expect."""
    if claims.session_id is None:
        raise _unauthorized("This route needs a session token: POST /api/v1/auth/session")
    row = await repo.owned_session(db, user.id, claims.session_id)
    if row is None:  # deleted: a 404 as the template answers (its app logs out on any 401)
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Session not found")
    return row


CurrentSession = Annotated[SessionRow, Depends(current_session)]


async def session_of(session_id: str, claims: Claims, user: CurrentUser, db: Db) -> SessionRow:
    """A session in the path that the user owns — 404 otherwise (never leaks existence); a
    session token's own session only (403)."""
    check_scope(claims, session_id)
    row = await repo.owned_session(db, user.id, session_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Session not found")
    return row


OwnedSession = Annotated[SessionRow, Depends(session_of)]


async def owned_or_404(state: AppState, query: Select[T], what: str, **params: Any) -> T:
    """The row ``query`` (which filters by owner; ``params`` its values) finds, read directly;
    a 404 naming ``what`` otherwise — unknown and foreign ids alike, so existence never leaks."""
    row = await state.backend.direct.first(query, **params)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"{what} not found")
    return row


async def session_read(session_id: str, claims: Claims, request: Request) -> SessionRow:
    """Like :func:`session_of`, read directly: for routes that do not change the session. The
    owned session is the check: a valid token's user owns it (no read of the user's row)."""
    check_scope(claims, session_id)
    return await owned_or_404(
        state_of(request),
        repo.OWNED_SESSION,
        "Session",
        session_id=session_id,
        user_id=claims.user_id,
    )


ReadSession = Annotated[SessionRow, Depends(session_read)]
