"""LangGraph's checkpoints in a SQLite file, through the file's :class:`LoopFirst` lanes.

LangGraph's ``AsyncSqliteSaver`` sends every statement to aiosqlite's thread and waits for the
answer: a checkpoint (its writes, then the checkpoint row) costs several thread round trips, a
millisecond or more on a small, busy machine, and a workflow run waits for three of them.
:class:`SqliteCheckpointer` runs LangGraph's own synchronous ``SqliteSaver`` code (so the rows
are the ones LangGraph writes and reads) on the event loop on a connection that never waits for
a lock, and on a worker thread when another connection holds the lock. Every write is committed
before it returns.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from teamgraph.faults import point
from teamgraph.storage.sqlite import BUSY_TIMEOUT_S, LoopFirst, connect

T = TypeVar("T")
log = logging.getLogger(__name__)


class _SaverLane:
    """A ``SqliteSaver`` on a connection of its own (it commits each operation itself)."""

    def __init__(self, path: str | Path, wait_s: float, serde: SerializerProtocol) -> None:
        self.saver = SqliteSaver(connect(path, wait_s, autocommit=False), serde=serde)

    def run(self, operation: Callable[[SqliteSaver], T]) -> T:
        try:
            return operation(self.saver)
        except BaseException:
            self.saver.conn.rollback()  # whatever a failed operation began is not kept
            raise

    def close(self) -> None:
        self.saver.conn.close()


class SqliteCheckpointer(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer for one SQLite file. Opening sets its tables up (it may wait
    for the lock: open it off the event loop)."""

    def __init__(self, path: str | Path, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        fast, slow = _SaverLane(path, 0.0, self.serde), _SaverLane(path, BUSY_TIMEOUT_S, self.serde)
        self.lanes: LoopFirst[SqliteSaver] = LoopFirst(fast, slow)
        self.lanes.waiting(lambda saver: saver.setup())
        fast.saver.is_setup = True  # the same file's tables, set up through the other lane
        self._versions = slow.saver

    def close(self) -> None:
        self.lanes.close()

    # --- async: the event loop first --------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.lanes.run(lambda saver: saver.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await self.lanes.run(
            lambda saver: list(saver.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        point("checkpoint.before")
        saved = await self.lanes.run(
            lambda saver: saver.put(config, checkpoint, metadata, new_versions)
        )
        point("checkpoint.after")
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.lanes.run(lambda saver: saver.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self.lanes.run(lambda saver: saver.delete_thread(thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """LangGraph's ``prune`` (which ``SqliteSaver`` lacks): ``keep_latest`` keeps each
        namespace's latest checkpoint and its writes, ``delete`` removes the threads. One
        transaction; a checkpoint saved meanwhile is newer than the latest seen, and kept."""
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in _PRUNE:
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        statements, threads = _PRUNE[strategy], [(str(t),) for t in thread_ids]

        def prune(saver: SqliteSaver) -> None:
            for statement in statements:
                saver.conn.executemany(statement, threads)
            saver.conn.commit()

        if threads:
            await self.lanes.run(prune)

    async def athreads(self, thread_ids: Sequence[str]) -> list[str]:
        """These threads and their nested teams' (``{thread_id}/…``), those with checkpoints."""
        query = (
            "SELECT DISTINCT thread_id FROM checkpoints"
            " WHERE thread_id = ? OR (thread_id > ? AND thread_id < ?)"
        )

        def threads(saver: SqliteSaver) -> list[str]:
            found: set[str] = set()
            for thread in thread_ids:
                rows = saver.conn.execute(query, (thread, f"{thread}/", f"{thread}0"))
                found.update(str(row[0]) for row in rows)
            saver.conn.rollback()  # a read: end its transaction
            return sorted(found)

        return await self.lanes.run(threads)

    # --- sync: for callers off the event loop ---------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.lanes.waiting(lambda saver: saver.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return iter(
            self.lanes.waiting(
                lambda saver: list(saver.list(config, filter=filter, before=before, limit=limit))
            )
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.lanes.waiting(
            lambda saver: saver.put(config, checkpoint, metadata, new_versions)
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.lanes.waiting(lambda saver: saver.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self.lanes.waiting(lambda saver: saver.delete_thread(thread_id))

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self._versions.get_next_version(current, channel)


_NEWER = (  # per row: an older checkpoint of the same thread and namespace exists
    "SELECT max(c.checkpoint_id) FROM checkpoints c"
    " WHERE c.thread_id = {table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns"
)
_PRUNE = {
    "keep_latest": (
        "DELETE FROM writes WHERE thread_id = ?"
        f" AND checkpoint_id < ({_NEWER.format(table='writes')})",
        "DELETE FROM checkpoints WHERE thread_id = ?"
        f" AND checkpoint_id < ({_NEWER.format(table='checkpoints')})",
    ),
    "delete": (
        "DELETE FROM writes WHERE thread_id = ?",
        "DELETE FROM checkpoints WHERE thread_id = ?",
    ),
}


async def prune_threads(
    saver: BaseCheckpointSaver[Any], thread_ids: Sequence[str], *, keep_latest: bool
) -> None:
    """Prune runs' threads and their nested teams' threads (``{thread_id}/…``): keep only
    each one's latest checkpoint (a finished run: what its result and its session's next run
    read), or delete them (a run removed). Through the checkpointer's ``aprune`` — LangGraph's
    own on PostgreSQL. A thread that another transaction changes meanwhile (a session's next
    run) is left as it is: pruning is redone later, never needed for correctness."""
    threads = await _threads(saver, thread_ids)
    strategy = "keep_latest" if keep_latest else "delete"
    try:
        await saver.aprune(threads, strategy=strategy)
    except NotImplementedError:  # a checkpointer that cannot prune (or a DeltaChannel thread)
        log.info("checkpointer %s does not prune", type(saver).__name__)
    except Exception as exc:
        if type(exc).__name__ not in ("SerializationFailure", "DeadlockDetected"):
            raise
        log.info("threads %s changed while being pruned: left for later", threads)


async def _threads(saver: BaseCheckpointSaver[Any], thread_ids: Sequence[str]) -> list[str]:
    if isinstance(saver, SqliteCheckpointer):
        return await saver.athreads(thread_ids)
    pool = getattr(saver, "conn", None)
    if pool is None or not hasattr(pool, "connection"):  # not PostgreSQL's saver on a pool
        return list(thread_ids)
    # one query a thread: `= OR LIKE` uses the primary key and the prefix index (migration
    # checkpoint_thread_prefix); `LIKE ANY(array)` would scan the table
    query = "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id = %s OR thread_id LIKE %s"
    rows: list[Any] = []
    async with pool.connection() as conn, conn.cursor() as cursor:
        for thread in thread_ids:
            await cursor.execute(query, (thread, literal_like(thread) + "/%"))
            rows += await cursor.fetchall()
    return sorted({str(row["thread_id"] if isinstance(row, dict) else row[0]) for row in rows})


def literal_like(text: str) -> str:
    """``text`` matched literally by ``LIKE`` (whose escape character is ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def with_crash_points(saver_class: type[Any]) -> type[Any]:
    """``saver_class`` with the checkpoint crash points around ``aput`` (for checkpointers
    other than :class:`SqliteCheckpointer`, which has them)."""

    class Pointed(saver_class):  # type: ignore[misc]
        async def aput(self, *args: Any, **kwargs: Any) -> RunnableConfig:
            point("checkpoint.before")
            saved: RunnableConfig = await super().aput(*args, **kwargs)
            point("checkpoint.after")
            return saved

    Pointed.__name__ = saver_class.__name__
    return Pointed
