"""Short reads and write transactions on the app tables that never wait on the event loop.

SQLite has one writer at a time, and aiosqlite holds a transaction open across awaits: under a
busy event loop a write transaction keeps the lock for several loop turns, and every other writer
(the checkpointer, the step ledger, other requests) sleeps in SQLite's busy handler. aiosqlite also
runs every query on a thread of its own, and a burst of requests then fights the event loop for
the GIL. So on SQLite the hot path's point reads and short transactions run whole, synchronously:
first on the event loop on a connection that never waits for a lock (a WAL read or commit takes
tens of microseconds), and when another connection holds the lock, on a worker thread that waits
for it. On PostgreSQL writers do not serialize: the async engine is used as is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Executable, Row, Select, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.pool import StaticPool

Statement = tuple[Executable, Sequence[dict[str, Any]] | dict[str, Any] | None]
T = TypeVar("T")


class Direct:
    """``run`` (one write transaction), ``transaction`` (a function's statements in one),
    ``first`` (an ORM object) and ``rows`` (a query's rows)."""

    def __init__(self, engine: AsyncEngine, sqlite_path: Path | None = None) -> None:
        self.engine = engine
        self._fast: Engine | None = None
        self._conn: Connection | None = None  # the fast engine's, between operations
        self._slow: Engine | None = None
        self._slow_lock = threading.Lock()
        if sqlite_path is not None:
            url = f"sqlite:///{sqlite_path}"
            fast_args = {"timeout": 0.0, "check_same_thread": False}
            self._fast = create_engine(url, connect_args=fast_args, poolclass=StaticPool)
            slow_args = {"timeout": 30.0, "check_same_thread": False}
            self._slow = create_engine(url, connect_args=slow_args, poolclass=StaticPool)
            event.listen(self._fast, "connect", _pragmas(busy_ms=0))
            event.listen(self._slow, "connect", _pragmas(busy_ms=30_000))

    async def run(self, statements: Sequence[Statement]) -> None:
        """Execute ``statements`` (with their parameters) in one transaction."""
        if self._fast is None:
            async with self.engine.begin() as conn:
                for statement, parameters in statements:
                    await conn.execute(statement, parameters)
            return

        def transaction(conn: Connection) -> None:
            for statement, parameters in statements:
                conn.execute(statement, parameters)

        await self._sync(transaction)

    async def transaction(self, operation: Callable[[Connection], T]) -> T:
        """``operation``'s statements in one transaction: it reads and decides what to write on a
        synchronous connection (on PostgreSQL through ``run_sync``); an exception rolls it all
        back. It must not await: on SQLite it runs whole on the event loop.

        On SQLite the transaction takes the write lock before its first read (``BEGIN
        IMMEDIATE``; the driver would begin only at the first write), so what it read stands
        until it commits, for other processes too. On PostgreSQL (read committed) lock the rows
        the decision rests on (``SELECT … FOR UPDATE``)."""
        if self._fast is None:
            async with self.engine.begin() as conn:
                return await conn.run_sync(operation)

        def locked(conn: Connection) -> T:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return operation(conn)

        return await self._sync(locked)

    async def write(self, statement: Executable, parameters: dict[str, Any] | None = None) -> int:
        """Execute and commit one statement; the number of rows it matched."""
        if self._fast is None:
            async with self.engine.begin() as conn:
                return (await conn.execute(statement, parameters)).rowcount
        return await self._sync(lambda conn: conn.execute(statement, parameters).rowcount)

    async def returning(
        self, statement: Executable, parameters: dict[str, Any] | None = None
    ) -> list[Row[Any]]:
        """Execute and commit one statement; the rows it returns (``RETURNING``)."""
        if self._fast is None:
            async with self.engine.begin() as conn:
                return list((await conn.execute(statement, parameters)).all())
        return await self._sync(lambda conn: list(conn.execute(statement, parameters).all()))

    async def first(self, query: Select[T], /, **params: Any) -> T | None:
        """The first ORM object an entity query (``select(SomeRow)…``) selects, with
        ``params`` for its ``bindparam``s (detached: read it, do not change it).

        Build ``query`` once, with ``bindparam`` for its values: SQLAlchemy caches a statement
        by its structure, and keying a new statement object costs more than a point read
        (127 µs a read built per call with an ORM session, 50 µs prebuilt and read as a Core row;
        see BENCHMARKS). On SQLite the object is made from that row, without an ORM session."""
        entity = query.column_descriptions[0]["expr"]
        if not isinstance(entity, type):
            raise TypeError(f"first() reads an entity (select(SomeRow)), not {entity!r}")
        if self._fast is None:
            async with AsyncSession(self.engine, expire_on_commit=False) as session:
                return (await session.scalars(query, params)).first()

        def first(conn: Connection) -> T | None:
            row = conn.execute(query, params).first()
            if row is None:
                return None
            found: T = entity(**row._mapping)
            make_transient_to_detached(found)  # as if a session had loaded it and closed
            return found

        return await self._sync(first)

    async def rows(self, query: Executable, /, **params: Any) -> list[Row[Any]]:
        if self._fast is None:
            async with self.engine.connect() as conn:
                return list((await conn.execute(query, params)).all())
        return await self._sync(lambda conn: list(conn.execute(query, params).all()))

    async def _sync(self, operation: Callable[[Connection], T]) -> T:
        """``operation`` in one transaction (Core: no ORM session unless it opens one).

        The event loop's connection stays checked out between operations (nothing else uses
        it: an operation runs whole, without awaiting): checking a connection out of the pool
        and in again for each one cost more than a point read (27 → 15 µs a read, measured).
        After any error it is closed, and the next operation checks out a fresh one."""
        assert self._fast is not None
        conn, self._conn = self._conn, None  # in use (and dropped if the operation fails)
        try:
            conn = conn or self._fast.connect()
            with conn.begin():
                result = operation(conn)
        except OperationalError as exc:
            _close(conn)
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        except BaseException:
            _close(conn)
            raise
        else:
            self._conn = conn
            return result
        return await asyncio.to_thread(self._on_slow, operation)

    def _on_slow(self, operation: Callable[[Connection], T]) -> T:
        assert self._slow is not None
        with self._slow_lock, self._slow.begin() as conn:
            return operation(conn)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for engine in (self._fast, self._slow):
            if engine is not None:
                engine.dispose()


def _close(conn: Connection | None) -> None:
    if conn is not None:
        conn.close()


def _pragmas(busy_ms: int) -> Any:
    def set_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={busy_ms}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return set_pragmas
