"""Request dependencies: the app state, a database session, the authenticated user/session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import OAuth2PasswordBearer
from sqlalchemy import Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.server import api_keys
from teamgraph.server import repositories as repo
from teamgraph.server.cookies import TOKEN_COOKIE, check_csrf
from teamgraph.server.security import TokenClaims, decode_token
from teamgraph.server.state import AppState
from teamgraph.storage.models import SessionRow, UserRow

T = TypeVar("T")

oauth2 = OAuth2PasswordBearer(tokenUrl="/api/v1/auth/login", auto_error=False)


def state_of(request: Request) -> AppState:
    """The app's state. The routes every run goes through take it from their ``Request``
    rather than as a dependency of their dependencies: each dependency costs FastAPI ≈ 10 µs a
    request to solve (measured)."""
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


async def get_claims(
    request: Request, token: Annotated[str | None, Depends(oauth2)]
) -> TokenClaims:
    """The bearer token's claims (or an API key's, also taken from ``x-api-key``), or — for a
    same-origin browser client — the log-in cookie's (CSRF-checked:
    :mod:`teamgraph.server.cookies`)."""
    state = state_of(request)
    if not token:  # an API key as langgraph-sdk sends it
        token = request.headers.get("x-api-key")
    if not token and (token := request.cookies.get(TOKEN_COOKIE)):
        check_csrf(request, state.settings.cors_origins)
    if not token:
        raise _unauthorized("Not authenticated")
    if api_keys.is_api_key(token):
        key_hash = api_keys.digest(token)
        user = await state.backend.direct.first(api_keys.USER_OF_KEY, key_hash=key_hash)
        if user is None:
            raise _unauthorized("Invalid or revoked API key")
        return TokenClaims(user.id, None, datetime.max.replace(tzinfo=UTC))
    claims = decode_token(state.settings.jwt_secret, token)
    if claims is None:
        raise _unauthorized()
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


async def current_session(claims: Claims, user: CurrentUser, db: Db) -> SessionRow:
    """The session of a session token (``POST /api/v1/auth/session``), as the seeds' chat
    routes expect."""
    if claims.session_id is None:
        raise _unauthorized("This route needs a session token: POST /api/v1/auth/session")
    row = await repo.owned_session(db, user.id, claims.session_id)
    if row is None:  # deleted: a 404 as the seed answers (its app logs out on any 401)
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Session not found")
    return row


CurrentSession = Annotated[SessionRow, Depends(current_session)]


async def session_of(session_id: str, user: CurrentUser, db: Db) -> SessionRow:
    """A session in the path that the user owns — 404 otherwise (never leaks existence)."""
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
    return await owned_or_404(
        state_of(request),
        repo.OWNED_SESSION,
        "Session",
        session_id=session_id,
        user_id=claims.user_id,
    )


ReadSession = Annotated[SessionRow, Depends(session_read)]
