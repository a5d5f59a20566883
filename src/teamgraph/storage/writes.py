"""Short write transactions on the app tables that never hold a lock across an ``await``.

SQLite has one writer at a time, and aiosqlite holds a transaction open across awaits: under a
busy event loop a write transaction keeps the lock for several loop turns, and every other writer
(the checkpointer, the step ledger, other requests) sleeps in SQLite's busy handler. So on SQLite
a transaction here is run whole, synchronously: first on the event loop on a connection that never
waits for the lock (a commit in WAL mode takes tens of microseconds), and when another connection
holds the lock, on a worker thread that waits for it. On PostgreSQL writers do not serialize: the
async engine is used as is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Executable, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

Statement = tuple[Executable, Sequence[dict[str, Any]] | dict[str, Any] | None]


class Writes:
    """``await writes.run([(statement, parameters), ...])``: one transaction."""

    def __init__(self, engine: AsyncEngine, sqlite_path: Path | None = None) -> None:
        self.engine = engine
        self._fast: Engine | None = None
        self._slow: Engine | None = None
        self._slow_lock = threading.Lock()
        if sqlite_path is not None:
            url = f"sqlite:///{sqlite_path}"
            fast_args = {"timeout": 0.0, "check_same_thread": False}
            self._fast = create_engine(url, connect_args=fast_args, poolclass=StaticPool)
            self._slow = create_engine(url, connect_args={"timeout": 30.0}, poolclass=StaticPool)
            event.listen(self._fast, "connect", _pragmas(busy_ms=0))
            event.listen(self._slow, "connect", _pragmas(busy_ms=30_000))

    async def run(self, statements: Sequence[Statement]) -> None:
        if self._fast is None:
            async with self.engine.begin() as conn:
                for statement, parameters in statements:
                    await conn.execute(statement, parameters)
            return
        try:
            with self._fast.begin() as conn:
                _execute(conn, statements)
            return
        except OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        await asyncio.to_thread(self._on_slow, statements)

    def _on_slow(self, statements: Sequence[Statement]) -> None:
        assert self._slow is not None
        with self._slow_lock, self._slow.begin() as conn:
            _execute(conn, statements)

    def close(self) -> None:
        for engine in (self._fast, self._slow):
            if engine is not None:
                engine.dispose()


def _execute(conn: Connection, statements: Sequence[Statement]) -> None:
    for statement, parameters in statements:
        conn.execute(statement, parameters)


def _pragmas(busy_ms: int) -> Any:
    def set_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={busy_ms}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return set_pragmas
