"""``/api/v1/auth/api-keys``: a user's API keys — make one (the key is shown once), list them
(without the keys), revoke one."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, Field

from teamgraph.server import api_keys
from teamgraph.server.deps import CurrentUser, Db
from teamgraph.storage.models import ApiKeyRow

router = APIRouter(prefix="/api/v1/auth/api-keys", tags=["auth"])


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


def _out(row: ApiKeyRow) -> KeyOut:
    return KeyOut(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


@router.post("", response_model=NewKeyOut, status_code=status.HTTP_201_CREATED)
async def create_key(body: NewKeyIn, user: CurrentUser, db: Db) -> NewKeyOut:
    made = await api_keys.create(db, user.id, body.name)
    return NewKeyOut(**_out(made.row).model_dump(), key=made.key)


@router.get("", response_model=list[KeyOut])
async def list_keys(user: CurrentUser, db: Db) -> list[KeyOut]:
    return [_out(row) for row in await api_keys.owned(db, user.id)]


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: str, user: CurrentUser, db: Db) -> None:
    if not await api_keys.revoke(db, user.id, key_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="API key not found")
