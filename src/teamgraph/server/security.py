"""Passwords (argon2 via pwdlib) and bearer tokens (JWT via PyJWT)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import jwt
from pwdlib import PasswordHash

_HASHER = PasswordHash.recommended()
_ALGORITHM = "HS256"
_PROCESS_SECRET = secrets.token_urlsafe(32)


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


@dataclass(frozen=True)
class TokenClaims:
    user_id: str
    session_id: str | None
    expires_at: datetime


def create_token(
    secret: str, user_id: str, minutes: int, session_id: str | None = None
) -> tuple[str, datetime]:
    expires = datetime.now(UTC) + timedelta(minutes=minutes)
    claims: dict[str, object] = {"sub": user_id, "exp": expires}
    if session_id:
        claims["sid"] = session_id
    return jwt.encode(claims, secret or _PROCESS_SECRET, algorithm=_ALGORITHM), expires


def decode_token(secret: str, token: str) -> TokenClaims | None:
    """The token's claims, or ``None`` when it is malformed, forged or expired. A token is
    verified once per process (the rate limiter and the route both read every request's), its
    expiry at every use."""
    claims = _verified(secret, token)
    if claims is None or claims.expires_at <= datetime.now(UTC):
        return None
    return claims


@lru_cache(maxsize=4096)
def _verified(secret: str, token: str) -> TokenClaims | None:
    try:
        data = jwt.decode(token, secret or _PROCESS_SECRET, algorithms=[_ALGORITHM])
    except jwt.PyJWTError:
        return None
    if not isinstance(data.get("sub"), str):
        return None
    sid = data.get("sid")
    return TokenClaims(
        data["sub"], sid if isinstance(sid, str) else None, datetime.fromtimestamp(data["exp"], UTC)
    )
