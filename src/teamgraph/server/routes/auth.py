"""Accounts: register, log in (a bearer token, and the log-in cookie for same-origin pages),
log out, reset a password with the master password, and the user's API keys (``/api/v1/auth/…``,
paths and shapes as the FastAPI agent template's clients call them)."""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import OAuth2PasswordRequestForm
from pydantic import BaseModel, Field, ValidationError

from teamgraph.server import credentials
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.schemas import Credentials, Token, UserOut
from teamgraph.server.state import AppState
from teamgraph.storage.models import ApiKeyRow

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


def issue_token(state: AppState, user_id: str, session_id: str | None = None) -> Token:
    """A user token, or with ``session_id`` a session token (valid ``jwt_expiry_minutes``)."""
    settings = state.settings
    value, expires = credentials.create_token(
        settings.jwt_secret, user_id, settings.jwt_expiry_minutes, session_id
    )
    return Token(access_token=value, expires_at=expires)


@router.post("/register", response_model=UserOut, status_code=status.HTTP_201_CREATED)
async def register(body: Credentials, state: State, db: Db) -> UserOut:
    """Create an account (password: 8–64 characters with upper, lower, digit and special)."""
    email = body.email.lower()
    if await repo.user_by_email(db, email) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail="Email already registered")
    user = await repo.create_user(db, email, credentials.hash_password(body.password))
    return UserOut(id=user.id, email=user.email, token=issue_token(state, user.id))


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
    if user is None or not credentials.verify_password(form.password, user.password_hash):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="Incorrect email or password",
            headers={"WWW-Authenticate": "Bearer"},
        )
    token = issue_token(state, user.id)
    credentials.set_login_cookies(response, request, token.access_token, token.expires_at)
    return token


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(response: Response) -> None:
    """Forget the log-in cookies (a bearer token stays valid until it expires)."""
    credentials.clear_login_cookies(response)


@router.post("/reset-password")
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


@router.post("/api-keys", response_model=NewKeyOut, status_code=status.HTTP_201_CREATED)
async def create_key(body: NewKeyIn, user: CurrentUser, db: Db) -> NewKeyOut:
    """A key for the user (shown this once; only its SHA-256 is stored)."""
    made = await credentials.create_key(db, user.id, body.name)
    return NewKeyOut(**_key_out(made.row).model_dump(), key=made.key)


@router.get("/api-keys", response_model=list[KeyOut])
async def list_keys(user: CurrentUser, db: Db) -> list[KeyOut]:
    """The user's keys, revoked ones too (without the keys)."""
    return [_key_out(row) for row in await credentials.owned_keys(db, user.id)]


@router.delete("/api-keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: str, user: CurrentUser, state: State, db: Db) -> None:
    """Revoke a key: refused at once by this process, within ``API_KEY_CACHE_S`` by others."""
    key_hash = await credentials.revoke_key(db, user.id, key_id)
    if key_hash is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="API key not found")
    state.authenticator.forget(key_hash)
