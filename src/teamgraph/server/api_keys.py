"""Per-user API keys: ``tg-`` and 43 random characters, shown once when made; only the key's
SHA-256 is stored (a key has 256 bits of entropy: a fast hash cannot be searched back). A key
authenticates as its user everywhere a bearer token does, until it is revoked."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.storage.models import ApiKeyRow, UserRow, utcnow

PREFIX = "tg-"
SHOWN = 11  # characters of a key kept to tell keys apart: "tg-" and 8 more


@dataclass(frozen=True)
class NewKey:
    """A key just made: ``key`` is never readable again."""

    row: ApiKeyRow
    key: str


def is_api_key(token: str) -> bool:
    return token.startswith(PREFIX)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def create(db: AsyncSession, user_id: str, name: str) -> NewKey:
    key = PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(
        id=uuid.uuid4().hex, user_id=user_id, name=name, prefix=key[:SHOWN], key_hash=digest(key)
    )
    db.add(row)
    await db.commit()
    return NewKey(row, key)


async def owned(db: AsyncSession, user_id: str) -> list[ApiKeyRow]:
    """The user's keys, revoked ones too, oldest first."""
    query = select(ApiKeyRow).where(ApiKeyRow.user_id == user_id).order_by(ApiKeyRow.created_at)
    return list(await db.scalars(query))


async def revoke(db: AsyncSession, user_id: str, key_id: str) -> bool:
    """Revoke one of the user's keys; False when the user has no such key."""
    query = select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.user_id == user_id)
    row = (await db.scalars(query)).first()
    if row is None:
        return False
    row.revoked_at = row.revoked_at or utcnow()
    await db.commit()
    return True


# The user a live key belongs to (param ``key_hash``: :func:`digest` of the key), built once.
USER_OF_KEY = (
    select(UserRow)
    .join(ApiKeyRow, ApiKeyRow.user_id == UserRow.id)
    .where(ApiKeyRow.key_hash == bindparam("key_hash"), ApiKeyRow.revoked_at.is_(None))
)
