"""The SQLite checkpointer, with the step ledger's fast path.

``AsyncSqliteSaver`` sends every statement to aiosqlite's thread and waits for the answer: a
checkpoint (its writes, then the checkpoint row) costs several thread round trips, a millisecond
or more on a small, busy machine, and a workflow run waits for three of them. Committing the same
rows on the event loop, on a connection that never waits for a lock, takes tens of microseconds.
:class:`LoopSqliteSaver` does that (with LangGraph's own synchronous ``SqliteSaver`` code, so the
rows are the ones ``AsyncSqliteSaver`` writes) and falls back to the aiosqlite path whenever
another connection holds the write lock, so the loop never waits behind a transaction that itself
needs the loop to finish. Durability is unchanged: every write is committed before it returns
(WAL, ``synchronous=NORMAL``, as on the aiosqlite connection).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from teamgraph.faults import point

T = TypeVar("T")


class _Busy(Exception):
    """Another connection holds the lock (or the fast connection is in use): take the slow path."""


class LoopSqliteSaver(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` whose reads and writes first try a lock-free commit on the loop."""

    _on_loop: SqliteSaver | None = None

    def open_fast_path(self, path: str | Path) -> None:
        conn = sqlite3.connect(str(path), timeout=0.0, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        self._on_loop = SqliteSaver(conn, serde=self.serde)
        self._on_loop.is_setup = True  # the schema is set up through the aiosqlite connection
        self._guard = threading.Lock()

    def close_fast_path(self) -> None:
        if self._on_loop is not None:
            self._on_loop.conn.close()
            self._on_loop = None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        try:
            return self._fast(lambda saver: saver.get_tuple(config))
        except _Busy:
            return await super().aget_tuple(config)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        point("checkpoint.before")
        try:
            saved = self._fast(lambda saver: saver.put(config, checkpoint, metadata, new_versions))
        except _Busy:
            saved = await super().aput(config, checkpoint, metadata, new_versions)
        point("checkpoint.after")
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        try:
            self._fast(lambda saver: saver.put_writes(config, writes, task_id, task_path))
        except _Busy:
            await super().aput_writes(config, writes, task_id, task_path)

    def _fast(self, operation: Callable[[SqliteSaver], T]) -> T:
        saver = self._on_loop
        if saver is None or not self._guard.acquire(blocking=False):
            raise _Busy
        try:
            return operation(saver)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            saver.conn.rollback()  # nothing was written: the first write needs the lock
            raise _Busy from exc
        finally:
            self._guard.release()


def with_crash_points(saver_class: type[Any]) -> type[Any]:
    """``saver_class`` with the checkpoint crash points around ``aput`` (for checkpointers
    other than :class:`LoopSqliteSaver`, which has them)."""

    class Pointed(saver_class):  # type: ignore[misc]
        async def aput(self, *args: Any, **kwargs: Any) -> RunnableConfig:
            point("checkpoint.before")
            saved: RunnableConfig = await super().aput(*args, **kwargs)
            point("checkpoint.after")
            return saved

    Pointed.__name__ = saver_class.__name__
    return Pointed
