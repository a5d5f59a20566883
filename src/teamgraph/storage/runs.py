"""The run repository: create, update, fetch and list runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Executable, insert, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from teamgraph.errors import RunNotFound
from teamgraph.storage.migrate import upgrade
from teamgraph.storage.models import RunRow, utcnow


class RunRepository:
    """``fast`` (SQLite): a synchronous engine whose connections never wait for a lock. A run's
    own row writes (start and end of every run) are committed through it on the event loop, in
    well under a millisecond, and go through ``engine`` (a worker thread that may wait) whenever
    another connection holds the write lock."""

    def __init__(self, engine: AsyncEngine, fast: Engine | None = None) -> None:
        self.engine = engine
        self.fast = fast
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def create_tables(self) -> None:
        """Migrate the app tables to the latest schema (Alembic)."""
        await upgrade(self.engine)

    async def create(self, **fields: Any) -> None:
        await self._write(insert(RunRow).values(**fields))

    async def update(self, run_id: str, **fields: Any) -> None:
        statement = update(RunRow).where(RunRow.id == run_id).values(**fields, updated_at=utcnow())
        if await self._write(statement) == 0:
            raise RunNotFound(f"no run with id {run_id!r}")

    async def _write(self, statement: Executable) -> int:
        """Execute and commit ``statement``; the number of rows it matched."""
        if self.fast is not None:
            try:
                with self.fast.begin() as conn:
                    return conn.execute(statement).rowcount
            except OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
        async with self.engine.begin() as conn:
            return (await conn.execute(statement)).rowcount

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
