"""The run repository: create, update, fetch and list runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from teamgraph.errors import RunNotFound
from teamgraph.storage.direct import Direct
from teamgraph.storage.migrate import upgrade
from teamgraph.storage.models import RunRow, utcnow

_UPDATE = update(RunRow).where(RunRow.id == bindparam("run_id_"))  # built and compiled once


class RunRepository:
    """A run's own row writes (start and end of every run) go through ``direct``: on SQLite they
    commit on the event loop in well under a millisecond, and on a worker thread that may wait
    whenever another connection holds the write lock."""

    def __init__(self, engine: AsyncEngine, direct: Direct) -> None:
        self.engine = engine
        self.direct = direct
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def create_tables(self) -> None:
        """Migrate the app tables to the latest schema (Alembic)."""
        await upgrade(self.engine)

    async def create(self, **fields: Any) -> None:
        await self.direct.run([(insert(RunRow), fields)])  # parameters apart: a cached statement

    async def update(self, run_id: str, **fields: Any) -> None:
        parameters = {**fields, "updated_at": utcnow(), "run_id_": run_id}  # SET: the fields
        if await self.direct.write(_UPDATE, parameters) == 0:
            raise RunNotFound(f"no run with id {run_id!r}")

    async def get(self, run_id: str) -> RunRow:
        async with self.sessions() as session:
            row = await session.get(RunRow, run_id)
        if row is None:
            raise RunNotFound(f"no run with id {run_id!r}")
        return row

    async def list(self, limit: int = 50, since: datetime | None = None) -> list[RunRow]:
        query = select(RunRow).order_by(RunRow.created_at.desc()).limit(limit)
        if since is not None:
            query = query.where(RunRow.created_at >= since)
        async with self.sessions() as session:
            return list((await session.scalars(query)).all())
