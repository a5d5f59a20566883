"""SQLite, one way: the settings every connection gets, and operations that never wait on the
event loop.

**Settings.** Every connection teamgraph opens to a SQLite file — the app tables, the step
ledger, the journal, LangGraph's checkpointer and store, the knowledge index — is in WAL mode
with ``synchronous=NORMAL`` (a committed transaction survives the process being killed; only an
OS crash or a power loss may lose the last commits) and a busy timeout: :func:`connect` for
``sqlite3``, :func:`on_connect` for SQLAlchemy engines, :func:`statements` for aiosqlite.

**Operations that never wait on the event loop** (:class:`LoopFirst`). SQLite has one writer at
a time. A write that waits for the lock on the event loop stalls every other request; one that
waits on aiosqlite's thread holds its transaction across loop turns, so the lock holder itself
may need the loop to finish (and a burst of them fights the loop for the GIL). So an operation
runs whole and synchronously: first on the event loop, on a connection that never waits for a
lock (a WAL read or commit takes tens of microseconds), and — when another connection holds the
lock — on a worker thread, on a connection that waits for it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

BUSY_TIMEOUT_S = 30.0  # how long a waiting connection waits for the write lock
C = TypeVar("C")
C_co = TypeVar("C_co", covariant=True)
T = TypeVar("T")


def statements(wait_s: float) -> list[str]:
    """The settings of a connection that waits ``wait_s`` for a lock, as SQL statements. The
    busy timeout comes first: switching to WAL waits for another connection's lock.
    ``auto_vacuum`` takes effect in a new file only (before its first table), and is set by
    connections that wait for the lock (the first one opened on a file is one): pages freed by
    deletes can then be given back (``PRAGMA incremental_vacuum``, ``RunStore.reclaim``)."""
    return [
        f"PRAGMA busy_timeout={int(wait_s * 1000)}",
        *(["PRAGMA auto_vacuum=INCREMENTAL"] if wait_s else []),
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=NORMAL",
    ]


def configure(dbapi_connection: Any, wait_s: float) -> None:
    """Apply :func:`statements` to an open DB-API connection."""
    cursor = dbapi_connection.cursor()
    for statement in statements(wait_s):
        cursor.execute(statement)
    cursor.close()


def on_connect(wait_s: float) -> Callable[[Any, Any], None]:
    """A SQLAlchemy ``connect`` event listener that configures each new connection."""

    def listener(dbapi_connection: Any, _record: Any) -> None:
        configure(dbapi_connection, wait_s)

    return listener


def connect(path: str | Path, wait_s: float, autocommit: bool = True) -> sqlite3.Connection:
    """A configured ``sqlite3`` connection usable from any thread (one at a time).
    ``autocommit``: every statement commits itself (no implicit transactions)."""
    conn = sqlite3.connect(
        str(path),
        timeout=wait_s,
        isolation_level=None if autocommit else "DEFERRED",
        check_same_thread=False,
    )
    configure(conn, wait_s)
    return conn


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` (sqlite3's, or SQLAlchemy's wrapping it) says another connection
    holds the lock: the operation may be tried again on a connection that waits."""
    cause = getattr(error, "orig", error)  # SQLAlchemy keeps the driver's error as ``orig``
    text = str(cause)
    return isinstance(cause, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class Lane(Protocol[C_co]):
    """A connection and how one operation runs on it as one transaction."""

    def run(self, operation: Callable[[C_co], T]) -> T:
        """``operation``, committed; an exception leaves nothing written."""
        ...

    def close(self) -> None: ...


class LoopFirst(Generic[C]):
    """Runs operations on one SQLite file: on the event loop on ``fast`` (a lane whose
    connection never waits for a lock), else on a worker thread on ``slow`` (one that waits).

    An operation must not await: it runs whole, and may run twice — the fast attempt rolled
    back when it met the lock, then the slow one."""

    def __init__(self, fast: Lane[C], slow: Lane[C]) -> None:
        self.fast, self.slow = fast, slow
        self._fast_lock = threading.Lock()  # taken: in use (by the loop, or a thread's call)
        self._slow_lock = threading.Lock()

    async def run(self, operation: Callable[[C], T]) -> T:
        if self._fast_lock.acquire(blocking=False):
            try:
                return self.fast.run(operation)
            except Exception as exc:
                if not is_busy(exc):
                    raise
            finally:
                self._fast_lock.release()
        return await asyncio.to_thread(self.waiting, operation)

    def waiting(self, operation: Callable[[C], T]) -> T:
        """``operation`` on the connection that waits for the lock (blocking: off the loop)."""
        with self._slow_lock:
            return self.slow.run(operation)

    def close(self) -> None:
        self.fast.close()
        self.slow.close()


class Autocommit:
    """A lane over a ``sqlite3`` connection in autocommit mode (each statement commits): for
    operations of one statement, or that open their own transaction."""

    def __init__(self, path: str | Path, wait_s: float) -> None:
        self.conn = connect(path, wait_s)

    def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        return operation(self.conn)

    def close(self) -> None:
        self.conn.close()


def autocommit_lanes(path: str | Path) -> LoopFirst[sqlite3.Connection]:
    """:class:`LoopFirst` over two autocommit ``sqlite3`` connections to ``path``."""
    return LoopFirst(Autocommit(path, 0.0), Autocommit(path, BUSY_TIMEOUT_S))
