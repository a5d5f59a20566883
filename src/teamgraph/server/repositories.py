"""Users, sessions and messages: every query takes the owner, so no route can reach another
user's rows. (Run rows belong to the run store, :mod:`teamgraph.storage.run_store`.)"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.storage.direct import Direct, Statement
from teamgraph.storage.models import MessageRow, RunRow, SessionRow, UserRow, utcnow
from teamgraph.storage.run_store import RunStore


async def user_by_email(db: AsyncSession, email: str) -> UserRow | None:
    return (await db.scalars(select(UserRow).where(UserRow.email == email))).first()


async def create_user(db: AsyncSession, email: str, password_hash: str) -> UserRow:
    user = UserRow(id=uuid.uuid4().hex, email=email, password_hash=password_hash)
    db.add(user)
    await db.commit()
    return user


async def create_session(
    db: AsyncSession, user_id: str, session_id: str | None = None, **fields: Any
) -> SessionRow:
    row = SessionRow(id=session_id or uuid.uuid4().hex, user_id=user_id, **fields)
    db.add(row)
    await db.commit()
    return row


async def set_password(db: AsyncSession, user: UserRow, password_hash: str) -> None:
    user.password_hash = password_hash
    await db.commit()


# A session its owner reads (params ``session_id``, ``user_id``): built once, as Direct.first
# wants its queries.
OWNED_SESSION = select(SessionRow).where(
    SessionRow.id == bindparam("session_id"), SessionRow.user_id == bindparam("user_id")
)


async def owned_session(db: AsyncSession, user_id: str, session_id: str) -> SessionRow | None:
    """The session if ``user_id`` owns it; ``None`` for unknown and foreign ids alike."""
    params = {"session_id": session_id, "user_id": user_id}
    return (await db.scalars(OWNED_SESSION, params)).first()


async def claimed_session(db: AsyncSession, session_id: str) -> SessionRow | None:
    """The session of an id a client chose (a thread id), whoever owns it: only to tell a free
    id from a taken one — a caller who does not own it is never shown it."""
    return await db.get(SessionRow, session_id)


async def conversation_sessions(
    db: AsyncSession, user_id: str, team: str, key: str, limit: int = 2
) -> list[SessionRow]:
    """The user's sessions on ``team`` whose conversation so far hashes to ``key`` (at most
    ``limit``: whether it is one or more is what the caller needs)."""
    query = (
        select(SessionRow)
        .where(
            SessionRow.user_id == user_id,
            SessionRow.team == team,
            SessionRow.conversation_key == key,
        )
        .limit(limit)
    )
    return list((await db.scalars(query)).all())


async def keep_conversation_key(direct: Direct, session_id: str, key: str) -> None:
    """What the session's conversation so far hashes to (the client sends it back next time)."""
    await direct.write(
        update(SessionRow).where(SessionRow.id == session_id).values(conversation_key=key)
    )


def bind_team(session_id: str, team: str) -> Statement:
    """The statement that binds a session to the team of its first run (stored in that run's
    own transaction)."""
    return update(SessionRow).where(SessionRow.id == session_id).values(team=team), None


async def list_sessions(
    db: AsyncSession, user_id: str, origin: str | None = None
) -> list[SessionRow]:
    """The user's sessions, latest first (``origin``: only those the dialect of that name made)."""
    query = (
        select(SessionRow)
        .where(SessionRow.user_id == user_id)
        .order_by(SessionRow.updated_at.desc(), SessionRow.created_at.desc())
    )
    if origin is not None:
        query = query.where(SessionRow.origin == origin)
    return list((await db.scalars(query)).all())


def set_meta(session_id: str, meta: dict[str, Any]) -> Statement:
    """The statement that sets a session's client metadata (and marks it updated)."""
    values = {"meta": meta, "updated_at": utcnow()}
    return update(SessionRow).where(SessionRow.id == session_id).values(**values), None


@dataclass(frozen=True)
class SessionTotals:
    messages: int = 0
    cost_usd: float = 0.0


async def session_totals(
    db: AsyncSession, runs: RunStore, session_ids: list[str]
) -> dict[str, SessionTotals]:
    """Messages and the runs' cost per session, in two grouped queries."""
    counted = await db.execute(
        select(MessageRow.session_id, func.count())
        .where(MessageRow.session_id.in_(session_ids))
        .group_by(MessageRow.session_id)
    )
    count = {sid: int(n) for sid, n in counted.all()}
    cost = await runs.cost_by_session(session_ids)
    return {sid: SessionTotals(count.get(sid, 0), cost.get(sid, 0.0)) for sid in session_ids}


async def rename_session(db: AsyncSession, row: SessionRow, name: str) -> SessionRow:
    row.name, row.updated_at = name, utcnow()
    await db.commit()
    return row


async def copy_session(db: AsyncSession, row: SessionRow, copy: SessionRow) -> None:
    """Give ``copy`` the team and the messages of ``row`` (same owner)."""
    copy.team, copy.template = row.team, row.template
    for m in await messages(db, row.id):
        db.add(
            MessageRow(
                session_id=copy.id,
                role=m.role,
                content=m.content,
                run_id=m.run_id,
                created_at=m.created_at,
            )
        )
    await db.commit()


async def delete_session(db: AsyncSession, row: SessionRow) -> None:
    await db.execute(delete(MessageRow).where(MessageRow.session_id == row.id))
    await db.delete(row)
    await db.commit()


def message(session_id: str, role: str, content: str, run_id: str | None = None) -> Statement:
    """A message of a session, as a statement (to store alone or in a run's own transaction)."""
    row = {"session_id": session_id, "role": role, "content": content, "run_id": run_id}
    return insert(MessageRow), row


async def add_message(
    direct: Direct, session_id: str, role: str, content: str, run_id: str | None = None
) -> None:
    """Store a message: one short write, off the ORM (on SQLite an ORM session on aiosqlite
    cost a run through the API a sixth of its CPU, measured)."""
    await direct.run([message(session_id, role, content, run_id)])


async def messages(db: AsyncSession, session_id: str) -> list[MessageRow]:
    query = select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id)
    return list((await db.scalars(query)).all())


async def messages_page(
    db: AsyncSession,
    session_id: str,
    limit: int,
    offset: int = 0,
    before: datetime | None = None,
    after: datetime | None = None,
) -> tuple[list[MessageRow], int]:
    """A page of the session's messages, oldest first, and how many match in all."""
    where = [MessageRow.session_id == session_id]
    if before is not None:
        where.append(MessageRow.created_at < before)
    if after is not None:
        where.append(MessageRow.created_at > after)
    total = await db.scalar(select(func.count()).select_from(MessageRow).where(*where))
    page = select(MessageRow).where(*where).order_by(MessageRow.id).offset(offset).limit(limit)
    return list((await db.scalars(page)).all()), int(total or 0)


async def billed_messages(
    db: AsyncSession, runs: RunStore, session_id: str, run_ids: set[str]
) -> dict[int, RunRow]:
    """For each of the session's runs among ``run_ids``: its last assistant message's id →
    the run (the message that carries the run's tokens and cost)."""
    if not run_ids:
        return {}
    last = await db.execute(
        select(MessageRow.run_id, func.max(MessageRow.id))
        .where(
            MessageRow.session_id == session_id,
            MessageRow.role == "assistant",
            MessageRow.run_id.in_(run_ids),
        )
        .group_by(MessageRow.run_id)
    )
    pairs = last.all()
    found = {r.id: r for r in await runs.list(len(run_ids), session_id=session_id, ids=run_ids)}
    return {int(mid): found[rid] for rid, mid in pairs if rid in found}


async def clear_messages(db: AsyncSession, session_id: str) -> int:
    count = await db.scalar(
        select(func.count()).select_from(MessageRow).where(MessageRow.session_id == session_id)
    )
    await db.execute(delete(MessageRow).where(MessageRow.session_id == session_id))
    await db.commit()
    return int(count or 0)
