"""The run queue: runs handed from API processes to ``teamgraph worker`` processes through
`procrastinate <https://procrastinate.readthedocs.io>`_, a maintained PostgreSQL job queue.

Why procrastinate (docs/deploy.md): it keeps its jobs in the PostgreSQL database the runs already
live in (no second service to run, back up and secure), claims with ``SELECT … FOR UPDATE SKIP
LOCKED`` (fair, no two workers get one job), wakes workers with LISTEN/NOTIFY rather than polling,
has async workers with a concurrency limit, worker heartbeats to find the jobs of a dead worker,
and a graceful shutdown on SIGTERM.

A job names a run and what to do with it (``start`` a stored run, ``resume`` it); the run's own
row, checkpoints and journal hold everything else, so a job can run twice harmlessly: the worker
holds the run's lease (:meth:`~teamgraph.storage.run_store.RunStore.take_lease`) while it executes
it, and a run that ended is left alone."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any, Literal

TASK = "teamgraph.execute_run"
QUEUE = "runs"
Kind = Literal["start", "resume"]
_SCHEMA_LOCK = 7_421_337  # advisory lock: one process creates the queue's tables


class RunQueue:
    """A procrastinate app on ``url``: :meth:`defer` from API processes, workers run its jobs."""

    def __init__(self, url: str, pool_size: int = 4) -> None:
        from procrastinate import App, PsycopgConnector

        self.url = url
        self.app = App(connector=PsycopgConnector(conninfo=url, min_size=1, max_size=pool_size))

    async def __aenter__(self) -> RunQueue:
        await self.setup()
        await self.app.open_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.app.close_async()

    async def setup(self) -> None:
        """Create procrastinate's tables once (several processes may start together)."""
        import psycopg
        from procrastinate.schema import SchemaManager

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            while True:  # polled, not blocking: see runtime.backend._setting_up_postgres
                cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (_SCHEMA_LOCK,))
                taken = await cursor.fetchone()
                if taken is not None and taken[0]:
                    break
                await asyncio.sleep(0.1)
            try:
                found = await (
                    await conn.execute("SELECT to_regclass('procrastinate_jobs')")
                ).fetchone()
                if found is None or found[0] is None:
                    await conn.execute(SchemaManager.get_schema())
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))

    async def defer(self, run_id: str, kind: Kind, trace: dict[str, str] | None = None) -> None:
        """Put the run in the queue (at most one waiting job per run: a second is dropped);
        ``trace``: the trace context the worker's spans join."""
        from procrastinate.exceptions import AlreadyEnqueued

        task = self.app.configure_task(name=TASK, queue=QUEUE, queueing_lock=run_id)
        with suppress(AlreadyEnqueued):  # a job waits already: it will see the run as it is then
            carried: dict[str, Any] = dict(trace or {})
            await task.defer_async(run_id=run_id, kind=kind, trace=carried)

    async def depth(self) -> int:
        """Jobs waiting to be claimed."""
        rows: list[dict[str, Any]] = await self.app.connector.execute_query_all_async(
            "SELECT count(*) AS n FROM procrastinate_jobs"
            " WHERE status = 'todo' AND queue_name = %(q)s",
            q=QUEUE,
        )
        return int(rows[0]["n"])
