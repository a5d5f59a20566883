"""Who is calling: the one place that reads a request's credential and resolves its user.

A request presents at most one credential, looked for in this order: ``Authorization: Bearer``
(a user token, a session token or an API key), ``x-api-key`` (an API key, as langgraph-sdk sends
it), then the HttpOnly log-in cookie (a token; a request authenticated by it alone that may change
something must pass the CSRF check, :func:`check_csrf`). :class:`Authenticator` resolves it to
:class:`TokenClaims` — the user, and the session of a session token. The routes' dependencies
(:mod:`teamgraph.server.deps`) and the rate limiter (:mod:`teamgraph.server.ratelimit`) both read
credentials here, so a caller is counted as the user it authenticates as, API-key users included.

- **Passwords**: argon2 (pwdlib); 8–64 characters with upper, lower, digit and special.
- **Tokens**: JWTs (PyJWT, HS256) with ``sub`` (the user), ``exp`` and, for a session token,
  ``sid``. A token is verified once per process, its expiry at every use; a token without a
  usable ``exp`` is not one this server issues and is refused.
- **API keys**: ``tg-`` and 43 random characters, shown once when made; only the key's SHA-256
  is stored (256 bits of entropy: a fast hash cannot be searched back). A key's user is
  remembered for :data:`API_KEY_CACHE_S` seconds; revoking a key takes effect at once in the
  process that revokes it and within that time in every other one.
- **The log-in cookie** (:data:`TOKEN_COOKIE`, HttpOnly, ``SameSite=Lax``) and a CSRF value the
  page's script may read (:data:`CSRF_COOKIE`, double submit).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit

import jwt
from fastapi import HTTPException, Request, Response, status
from pwdlib import PasswordHash
from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import cookie_parser
from starlette.types import Scope

from teamgraph.storage.direct import Direct
from teamgraph.storage.models import ApiKeyRow, UserRow, utcnow

TOKEN_COOKIE = "teamgraph_token"
CSRF_COOKIE = "teamgraph_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
API_KEY_PREFIX = "tg-"
API_KEY_SHOWN = 11  # characters of a key kept to tell keys apart: "tg-" and 8 more
API_KEY_CACHE_S = 10.0  # how long a key's user is remembered (revocation elsewhere: this long)
API_KEY_CACHE_SIZE = 4096
NEVER = datetime.max.replace(tzinfo=UTC)  # an API key's expiry

_HASHER = PasswordHash.recommended()
_ALGORITHM = "HS256"
_PROCESS_SECRET = secrets.token_urlsafe(32)


# --- passwords --------------------------------------------------------------------------------
def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password: str, hashed: str) -> bool:
    return _HASHER.verify(password, hashed)


def password_problems(password: str) -> list[str]:
    """What a password lacks: 8–64 characters with upper, lower, digit and special."""
    rules = [
        (8 <= len(password) <= 64, "be 8 to 64 characters long"),
        (re.search(r"[A-Z]", password), "contain an upper-case letter"),
        (re.search(r"[a-z]", password), "contain a lower-case letter"),
        (re.search(r"\d", password), "contain a digit"),
        (re.search(r"[^A-Za-z0-9]", password), "contain a special character"),
    ]
    return [f"password must {message}" for ok, message in rules if not ok]


# --- tokens -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenClaims:
    """Who a credential authenticates: the user, the session of a session token, and until when."""

    user_id: str
    session_id: str | None
    expires_at: datetime


def create_token(
    secret: str, user_id: str, minutes: float, session_id: str | None = None
) -> tuple[str, datetime]:
    expires = datetime.now(UTC) + timedelta(minutes=minutes)
    claims: dict[str, object] = {"sub": user_id, "exp": expires}
    if session_id:
        claims["sid"] = session_id
    return jwt.encode(claims, secret or _PROCESS_SECRET, algorithm=_ALGORITHM), expires


def decode_token(secret: str, token: str) -> TokenClaims | None:
    """The token's claims, or ``None`` when it is malformed, forged, expired or lacks a claim
    this server puts in every token. Verified once per process (the rate limiter and the route
    both read every request's token); the expiry is checked at every use."""
    claims = _verified(secret, token)
    if claims is None or claims.expires_at <= datetime.now(UTC):
        return None
    return claims


@lru_cache(maxsize=4096)
def _verified(secret: str, token: str) -> TokenClaims | None:
    try:
        data = jwt.decode(
            token, secret or _PROCESS_SECRET, algorithms=[_ALGORITHM], options={"require": ["exp"]}
        )
        expires = datetime.fromtimestamp(data["exp"], UTC)
    except (jwt.PyJWTError, ValueError, OverflowError, OSError):  # exp past year 9999: not ours
        return None
    sub, sid = data.get("sub"), data.get("sid")
    if not isinstance(sub, str):
        return None
    return TokenClaims(sub, sid if isinstance(sid, str) else None, expires)


def token_problem(secret: str, token: str) -> str:
    """Why :func:`decode_token` refused ``token``, in words for its 401 (read again, only on
    that path): which claim it lacks, that it expired, or that this server did not sign it."""
    try:
        data = jwt.decode(
            token, secret or _PROCESS_SECRET, algorithms=[_ALGORITHM], options={"require": ["exp"]}
        )
    except jwt.MissingRequiredClaimError as exc:
        return f"Invalid token: it has no {exc.claim!r} claim"
    except jwt.ExpiredSignatureError:
        return "Expired token: log in again"
    except (jwt.InvalidSignatureError, jwt.InvalidAlgorithmError):
        return "Invalid token: this server did not sign it"
    except jwt.exceptions.InvalidSubjectError:
        return "Invalid token: its 'sub' claim names no user"
    except (jwt.PyJWTError, ValueError, OverflowError, OSError):
        return "Invalid token: it is not a token this server issues"
    try:
        datetime.fromtimestamp(data["exp"], UTC)
    except (ValueError, OverflowError, OSError):
        return "Invalid token: its 'exp' claim is no time this server issues"
    if not isinstance(data.get("sub"), str):
        return "Invalid token: it has no 'sub' claim naming a user"
    return "Invalid or expired token"


# --- API keys ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NewKey:
    """A key just made: ``key`` is never readable again."""

    row: ApiKeyRow
    key: str


def is_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIX)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def create_key(db: AsyncSession, user_id: str, name: str) -> NewKey:
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(
        id=uuid.uuid4().hex,
        user_id=user_id,
        name=name,
        prefix=key[:API_KEY_SHOWN],
        key_hash=digest(key),
    )
    db.add(row)
    await db.commit()
    return NewKey(row, key)


async def owned_keys(db: AsyncSession, user_id: str) -> list[ApiKeyRow]:
    """The user's keys, revoked ones too, oldest first."""
    query = select(ApiKeyRow).where(ApiKeyRow.user_id == user_id).order_by(ApiKeyRow.created_at)
    return list(await db.scalars(query))


async def revoke_key(db: AsyncSession, user_id: str, key_id: str) -> str | None:
    """Revoke one of the user's keys; its hash (for :meth:`Authenticator.forget`), or ``None``
    when the user has no such key."""
    query = select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.user_id == user_id)
    row = (await db.scalars(query)).first()
    if row is None:
        return None
    row.revoked_at = row.revoked_at or utcnow()
    await db.commit()
    return row.key_hash


# The user a live key belongs to (param ``key_hash``: :func:`digest` of the key), built once.
USER_OF_KEY = (
    select(UserRow)
    .join(ApiKeyRow, ApiKeyRow.user_id == UserRow.id)
    .where(ApiKeyRow.key_hash == bindparam("key_hash"), ApiKeyRow.revoked_at.is_(None))
)


# --- reading a request's credential ------------------------------------------------------------
Source = Literal["bearer", "api-key-header", "cookie"]


@dataclass(frozen=True)
class Presented:
    """The credential a request presents, and where it was found."""

    token: str
    source: Source


def presented(scope: Scope) -> Presented | None:
    """The request's credential: the bearer token, else ``x-api-key``, else the log-in cookie
    (read from the ASGI scope, so middleware and routes read it alike)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in (b"authorization", b"x-api-key", b"cookie"):
            found.setdefault(name, value)
    scheme, _, token = found.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return Presented(token.strip(), "bearer")
    key = found.get(b"x-api-key", b"").decode("latin-1").strip()
    if key:
        return Presented(key, "api-key-header")
    cookie = found.get(b"cookie")
    token = cookie_parser(cookie.decode("latin-1")).get(TOKEN_COOKIE, "") if cookie else ""
    return Presented(token.strip(), "cookie") if token.strip() else None


class Authenticator:
    """Resolves a presented token — a JWT or an API key — to its claims (one per app)."""

    def __init__(
        self,
        secret: str,
        direct: Direct,
        ttl_s: float = API_KEY_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.secret, self.direct, self.ttl_s, self.clock = secret, direct, ttl_s, clock
        self._keys: dict[str, tuple[str, float]] = {}  # key hash → (user id, remembered until)

    async def claims(self, token: str) -> TokenClaims | None:
        """Whom ``token`` authenticates, or ``None`` (invalid, expired or revoked)."""
        if not is_api_key(token):
            return decode_token(self.secret, token)
        user_id = await self._key_user(digest(token))
        return TokenClaims(user_id, None, NEVER) if user_id is not None else None

    async def caller(self, scope: Scope) -> str | None:
        """The user a request's bearer token or API key authenticates, for the endpoints that
        take no log-in cookie (MCP, A2A: a page of another site must not call them as its
        visitor); ``None`` otherwise."""
        found = presented(scope)
        if found is None or found.source == "cookie":
            return None
        claims = await self.claims(found.token)
        return claims.user_id if claims is not None else None

    def forget(self, key_hash: str) -> None:
        """A revoked key: no longer remembered here."""
        self._keys.pop(key_hash, None)

    async def _key_user(self, key_hash: str) -> str | None:
        now = self.clock()
        remembered = self._keys.get(key_hash)
        if remembered is not None and remembered[1] > now:
            return remembered[0]
        user = await self.direct.first(USER_OF_KEY, key_hash=key_hash)
        if user is None:
            self._keys.pop(key_hash, None)
            return None
        if len(self._keys) >= API_KEY_CACHE_SIZE:
            self._keys = {k: v for k, v in self._keys.items() if v[1] > now}
            if len(self._keys) >= API_KEY_CACHE_SIZE:
                self._keys.clear()
        self._keys[key_hash] = (user.id, now + self.ttl_s)
        return user.id


# --- the log-in cookie --------------------------------------------------------------------------
def set_login_cookies(response: Response, request: Request, token: str, expires: datetime) -> None:
    """The token (HttpOnly) and a CSRF value the page's script may read (double submit)."""
    secure = request.url.scheme == "https"
    common = {"expires": expires, "path": "/", "secure": secure, "samesite": "lax"}
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, **common)  # type: ignore[arg-type]
    response.set_cookie(CSRF_COOKIE, secrets.token_urlsafe(24), **common)  # type: ignore[arg-type]


def clear_login_cookies(response: Response) -> None:
    for name in (TOKEN_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/")


def check_csrf(request: Request, trusted_origins: list[str]) -> None:
    """Refuse (403) a cookie-authenticated request that may change something unless the browser
    shows it comes from the same origin (``Sec-Fetch-Site: same-origin``, or an ``Origin`` equal
    to the host it was sent to or listed in ``TEAMGRAPH_CORS_ORIGINS``) or it carries
    :data:`CSRF_HEADER` equal to the :data:`CSRF_COOKIE` cookie. The cookie itself is
    ``SameSite=Lax``: other sites' pages never send it on a POST."""
    if request.method in SAFE_METHODS:
        return
    site = request.headers.get("sec-fetch-site")
    if site in ("same-origin", "none"):
        return
    origin = request.headers.get("origin")
    if origin and origin != "null" and _trusted(origin, request, trusted_origins):
        return
    sent = request.headers.get(CSRF_HEADER, "")
    kept = request.cookies.get(CSRF_COOKIE, "")
    if sent and kept and hmac.compare_digest(sent, kept):
        return
    raise HTTPException(
        status.HTTP_403_FORBIDDEN,
        detail=(
            "Cross-site request refused: a request authenticated by the log-in cookie must "
            f"come from the same origin or carry the {CSRF_HEADER} header "
            f"(the value of the {CSRF_COOKIE} cookie)"
        ),
    )


def _trusted(origin: str, request: Request, trusted_origins: list[str]) -> bool:
    if origin.rstrip("/") in (o.rstrip("/") for o in trusted_origins):
        return True
    host = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    return urlsplit(origin).netloc == host
