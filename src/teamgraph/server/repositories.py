"""Users, sessions and messages: every query takes the owner, so no route can reach another
user's rows."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.storage.models import MessageRow, SessionRow, UserRow, utcnow


async def user_by_email(db: AsyncSession, email: str) -> UserRow | None:
    return (await db.scalars(select(UserRow).where(UserRow.email == email))).first()


async def create_user(db: AsyncSession, email: str, password_hash: str) -> UserRow:
    user = UserRow(id=uuid.uuid4().hex, email=email, password_hash=password_hash)
    db.add(user)
    await db.commit()
    return user


async def create_session(db: AsyncSession, user_id: str, **fields: Any) -> SessionRow:
    row = SessionRow(id=uuid.uuid4().hex, user_id=user_id, **fields)
    db.add(row)
    await db.commit()
    return row


async def set_password(db: AsyncSession, user: UserRow, password_hash: str) -> None:
    user.password_hash = password_hash
    await db.commit()


async def owned_session(db: AsyncSession, user_id: str, session_id: str) -> SessionRow | None:
    """The session if ``user_id`` owns it; ``None`` for unknown and foreign ids alike."""
    query = select(SessionRow).where(SessionRow.id == session_id, SessionRow.user_id == user_id)
    return (await db.scalars(query)).first()


async def list_sessions(db: AsyncSession, user_id: str) -> list[SessionRow]:
    query = (
        select(SessionRow)
        .where(SessionRow.user_id == user_id)
        .order_by(SessionRow.updated_at.desc())
    )
    return list((await db.scalars(query)).all())


async def rename_session(db: AsyncSession, row: SessionRow, name: str) -> SessionRow:
    row.name, row.updated_at = name, utcnow()
    await db.commit()
    return row


async def delete_session(db: AsyncSession, row: SessionRow) -> None:
    await db.execute(delete(MessageRow).where(MessageRow.session_id == row.id))
    await db.delete(row)
    await db.commit()


async def add_message(
    db: AsyncSession, session_id: str, role: str, content: str, run_id: str | None = None
) -> MessageRow:
    row = MessageRow(session_id=session_id, role=role, content=content, run_id=run_id)
    db.add(row)
    await db.commit()
    return row


async def messages(db: AsyncSession, session_id: str) -> list[MessageRow]:
    query = select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id)
    return list((await db.scalars(query)).all())


async def clear_messages(db: AsyncSession, session_id: str) -> int:
    count = await db.scalar(
        select(func.count()).select_from(MessageRow).where(MessageRow.session_id == session_id)
    )
    await db.execute(delete(MessageRow).where(MessageRow.session_id == session_id))
    await db.commit()
    return int(count or 0)
