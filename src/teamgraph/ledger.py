"""Durable step results, keyed by run id and step id — never by call order.

A resumed workflow asks the ledger which steps already finished and hands every step its own
result, whatever order the steps completed in the first time. A record also keeps the step's
worker and task, so a record whose step changed is never taken for the new one. On SQLite the
ledger is one table in the checkpoint file; any LangGraph ``BaseStore`` works via
:class:`StoreLedger`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from langgraph.store.base import BaseStore
from pydantic import BaseModel

from teamgraph.events import TokenUsage

StepOutcome = Literal["running", "done", "failed", "skipped"]  # running: started, announced
T = TypeVar("T")


class StepRecord(BaseModel):
    """What a step produced — or, ``running``, that it started (and was announced)."""

    step_id: str
    worker: str
    task: str = ""
    status: StepOutcome
    output: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    usage: TokenUsage = TokenUsage()


class StepLedger(Protocol):
    """Durable step results, plus a journal of model replies and tool results: replaying a
    step after a crash or a pause returns the recorded values instead of calling again."""

    async def load(self, run_id: str) -> dict[str, StepRecord]: ...

    async def save(self, run_id: str, record: StepRecord) -> None: ...

    async def recall(self, key: str) -> str | None: ...

    async def record(self, key: str, value: str) -> None: ...

    async def journal(self, run_id: str) -> list[str]:
        """Every journal value recorded for the run (keys start with ``run_id/``)."""
        ...


def journal_run(key: str) -> str:
    """The run a journal key belongs to: its first segment (keys are scoped by run id)."""
    return key.split("/", 1)[0]


class StoreLedger:
    """A :class:`StepLedger` in a LangGraph store, namespace ``("teamgraph", "steps", run_id)``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    async def load(self, run_id: str) -> dict[str, StepRecord]:
        items = await self.store.asearch(("teamgraph", "steps", run_id), limit=100_000)
        return {item.key: StepRecord.model_validate(item.value) for item in items}

    async def save(self, run_id: str, record: StepRecord) -> None:
        value: dict[str, Any] = record.model_dump(mode="json")
        await self.store.aput(("teamgraph", "steps", run_id), record.step_id, value, index=False)

    async def recall(self, key: str) -> str | None:
        item = await self.store.aget(("teamgraph", "journal", journal_run(key)), key)
        return None if item is None else str(item.value["v"])

    async def record(self, key: str, value: str) -> None:
        namespace = ("teamgraph", "journal", journal_run(key))
        await self.store.aput(namespace, key, {"v": value}, index=False)

    async def journal(self, run_id: str) -> list[str]:
        items = await self.store.asearch(("teamgraph", "journal", run_id), limit=1_000_000)
        return [str(item.value["v"]) for item in items]


class SqliteLedger:
    """A :class:`StepLedger` in table ``tg_step_ledger`` of a SQLite file (WAL, synchronous=NORMAL:
    a saved step survives a killed process).

    Writes take a fast path on the event loop — a ~50 µs commit on a connection that never waits
    for a lock — and fall back to a worker thread that may wait, whenever another connection holds
    the write lock. The loop is thus never blocked behind a transaction that itself needs the
    loop to finish (aiosqlite holds transactions across awaits)."""

    def __init__(self, path: str | Path) -> None:
        self._fast = _connect(path, timeout=0.0)
        self._slow = _connect(path, timeout=30.0)
        self._fast_lock = threading.Lock()
        self._slow_lock = threading.Lock()
        with self._slow_lock:
            self._slow.execute(
                "CREATE TABLE IF NOT EXISTS tg_step_ledger (run_id TEXT NOT NULL, step_id TEXT "
                "NOT NULL, record TEXT NOT NULL, PRIMARY KEY (run_id, step_id))"
            )
            self._slow.execute(
                "CREATE TABLE IF NOT EXISTS tg_journal (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )

    async def recall(self, key: str) -> str | None:
        """A journal entry (a model reply or a tool result recorded by an earlier attempt)."""
        query = "SELECT value FROM tg_journal WHERE key = ?"
        row = await self._run(lambda conn: conn.execute(query, (key,)).fetchone())
        return None if row is None else str(row[0])

    async def record(self, key: str, value: str) -> None:
        statement = "INSERT OR REPLACE INTO tg_journal (key, value) VALUES (?, ?)"
        await self._run(lambda conn: conn.execute(statement, (key, value)))

    async def journal(self, run_id: str) -> list[str]:
        query = "SELECT value FROM tg_journal WHERE key > ? AND key < ?"  # keys 'run_id/...'
        bounds = (f"{run_id}/", f"{run_id}0")  # '0' follows '/' in every collation
        rows = await self._run(lambda conn: conn.execute(query, bounds).fetchall())
        return [str(value) for (value,) in rows]

    async def load(self, run_id: str) -> dict[str, StepRecord]:
        query = "SELECT step_id, record FROM tg_step_ledger WHERE run_id = ?"
        rows = await self._run(lambda conn: conn.execute(query, (run_id,)).fetchall())
        return {step_id: StepRecord.model_validate_json(record) for step_id, record in rows}

    async def save(self, run_id: str, record: StepRecord) -> None:
        statement = (
            "INSERT OR REPLACE INTO tg_step_ledger (run_id, step_id, record) VALUES (?, ?, ?)"
        )
        values = (run_id, record.step_id, record.model_dump_json())
        await self._run(lambda conn: conn.execute(statement, values))

    async def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        if self._fast_lock.acquire(blocking=False):
            try:
                return operation(self._fast)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            finally:
                self._fast_lock.release()
        return await asyncio.to_thread(self._on_slow, operation)

    def _on_slow(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._slow_lock:
            return operation(self._slow)

    def close(self) -> None:
        self._fast.close()
        self._slow.close()


def _connect(path: str | Path, timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path), timeout=timeout, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn
