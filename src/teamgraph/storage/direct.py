"""Short reads and write transactions on the app tables that never wait on the event loop.

On SQLite the hot path's point reads and short transactions run whole and synchronously through
the file's :class:`~teamgraph.storage.sqlite.LoopFirst` lanes (see that module for why): on the
event loop on a connection that never waits for a lock, else on a worker thread. On PostgreSQL
writers do not serialize: the async engine is used as is, and what is one statement (a read, a
single write) runs on an autocommit connection — no ``BEGIN`` and ``COMMIT`` round trips.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    CursorResult,
    Engine,
    Executable,
    Row,
    Select,
    create_engine,
    event,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.pool import StaticPool

from teamgraph.storage.sqlite import BUSY_TIMEOUT_S, LoopFirst, on_connect

Statement = tuple[Executable, Sequence[dict[str, Any]] | dict[str, Any] | None]
T = TypeVar("T")


class Direct:
    """``run`` (one write transaction), ``transaction`` (a function's statements in one),
    ``first`` (an ORM object) and ``rows`` (a query's rows)."""

    def __init__(self, engine: AsyncEngine, sqlite_path: Path | None = None) -> None:
        self.engine = engine
        self._single = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._lanes: LoopFirst[Connection] | None = None
        if sqlite_path is not None:
            fast = _EngineLane(_sqlite_engine(sqlite_path, 0.0))
            self._lanes = LoopFirst(fast, _EngineLane(_sqlite_engine(sqlite_path, BUSY_TIMEOUT_S)))

    async def run(self, statements: Sequence[Statement]) -> None:
        """Execute ``statements`` (with their parameters) in one transaction."""
        if self._lanes is not None:

            def each(conn: Connection) -> None:
                for statement, parameters in statements:
                    conn.execute(statement, parameters)

            return await self._lanes.run(each)
        if len(statements) == 1:  # one statement (not executemany) is atomic without BEGIN
            statement, parameters = statements[0]
            if not isinstance(parameters, Sequence):
                return await self._one(statement, parameters, lambda _: None)

        async def each_awaited(conn: AsyncConnection) -> None:
            for statement, parameters in statements:
                await conn.execute(statement, parameters)

        await self._on_postgres(each_awaited, atomic=True)

    async def transaction(self, operation: Callable[[Connection], T]) -> T:
        """``operation``'s statements in one transaction: it reads and decides what to write on a
        synchronous connection (on PostgreSQL through ``run_sync``); an exception rolls it all
        back. It must not await: on SQLite it runs whole on the event loop.

        On SQLite the transaction takes the write lock before its first read (``BEGIN
        IMMEDIATE``; the driver would begin only at the first write), so what it read stands
        until it commits, for other processes too. On PostgreSQL (read committed) lock the rows
        the decision rests on (``SELECT … FOR UPDATE``)."""
        if self._lanes is None:
            return await self._on_postgres(lambda conn: conn.run_sync(operation), atomic=True)

        def locked(conn: Connection) -> T:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return operation(conn)

        return await self._lanes.run(locked)

    async def write(self, statement: Executable, parameters: dict[str, Any] | None = None) -> int:
        """Execute and commit one statement; the number of rows it matched."""
        return await self._one(statement, parameters, lambda result: result.rowcount)

    async def returning(
        self, statement: Executable, parameters: dict[str, Any] | None = None
    ) -> list[Row[Any]]:
        """Execute and commit one statement; the rows it returns (``RETURNING``)."""
        return await self._one(statement, parameters, lambda result: list(result.all()))

    async def first(self, query: Select[T], /, **params: Any) -> T | None:
        """The first ORM object an entity query (``select(SomeRow)…``) selects, with
        ``params`` for its ``bindparam``s (detached: read it, do not change it).

        Build ``query`` once, with ``bindparam`` for its values: SQLAlchemy caches a statement
        by its structure, and keying a new statement object costs more than a point read. The
        object is made from a Core row, without an ORM session."""
        entity = query.column_descriptions[0]["expr"]
        if not isinstance(entity, type):
            raise TypeError(f"first() reads an entity (select(SomeRow)), not {entity!r}")
        return await self._one(query, params, lambda result: _made(entity, result.first()))

    async def rows(self, query: Executable, /, **params: Any) -> list[Row[Any]]:
        return await self._one(query, params, lambda result: list(result.all()))

    async def _one(
        self,
        statement: Executable,
        parameters: dict[str, Any] | None,
        read: Callable[[CursorResult[Any]], T],
    ) -> T:
        """One statement, committed, and what ``read`` takes from its result: on SQLite through
        the lanes, on PostgreSQL on an autocommit connection (no ``BEGIN``/``COMMIT``)."""
        if self._lanes is not None:
            return await self._lanes.run(lambda conn: read(conn.execute(statement, parameters)))

        async def one(conn: AsyncConnection) -> T:
            return read(await conn.execute(statement, parameters))

        return await self._on_postgres(one, atomic=False)

    async def _on_postgres(
        self, work: Callable[[AsyncConnection], Awaitable[T]], *, atomic: bool
    ) -> T:
        """``work`` on a connection — in a transaction (``atomic``), else autocommit — once more
        if the server had ended the connection it was lent: the pool lends without a round trip
        (:func:`~teamgraph.storage.outages.replace_if_disturbed`) and the server's goodbye can
        arrive just after the lend. Nothing runs twice — the server ran none of the first
        attempt — and SQLAlchemy has invalidated that connection and every older one: the second
        attempt gets a new one."""
        try:
            return await self._attempt(work, atomic)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) not in ENDED_BY_SERVER:
                raise
        return await self._attempt(work, atomic)

    async def _attempt(self, work: Callable[[AsyncConnection], Awaitable[T]], atomic: bool) -> T:
        async with self.engine.begin() if atomic else self._single.connect() as conn:
            return await work(conn)

    def close(self) -> None:
        if self._lanes is not None:
            self._lanes.close()


class _EngineLane:
    """A lane over a one-connection SQLAlchemy engine: each operation in one transaction.

    The connection stays checked out between operations (checking one out of the pool and in
    again cost more than a point read); after any error it is closed, and the next operation
    checks out a fresh one."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn: Connection | None = None

    def run(self, operation: Callable[[Connection], T]) -> T:
        conn, self._conn = self._conn, None  # in use (and dropped if the operation fails)
        try:
            conn = conn or self.engine.connect()
            with conn.begin():
                result = operation(conn)
        except BaseException:
            _close(conn)
            raise
        self._conn = conn
        return result

    def close(self) -> None:
        _close(self._conn)
        self._conn = None
        self.engine.dispose()


def _made(entity: type[T], row: Row[Any] | None) -> T | None:
    """The ORM object of ``row`` (detached, as if a session had loaded it and closed)."""
    if row is None:
        return None
    found = entity(**row._mapping)
    make_transient_to_detached(found)
    return found


ENDED_BY_SERVER = frozenset({"57P01", "57P02"})  # admin_shutdown, crash_shutdown
"""SQLSTATEs of a connection the server ended (``pg_terminate_backend``, a shutdown or restart):
it aborted whatever the connection had begun — nothing of it was committed."""


def _sqlite_engine(path: Path, wait_s: float) -> Engine:
    args = {"timeout": wait_s, "check_same_thread": False}
    engine = create_engine(f"sqlite:///{path}", connect_args=args, poolclass=StaticPool)
    event.listen(engine, "connect", on_connect(wait_s))
    return engine


def _close(conn: Connection | None) -> None:
    if conn is not None:
        conn.close()
