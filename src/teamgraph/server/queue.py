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
it, and a run that ended is left alone.

:class:`QueuedRunManager` is the run manager of an API-only process (``teamgraph serve
--workers 0``): every run is stored and put in the queue; ``teamgraph worker`` processes execute
it; this process streams its events from the database as the worker stores them (LISTEN/NOTIFY),
and passes cancels and replies on. The adapters see the same
:class:`~teamgraph.server.run_manager.RunManager` interface either way."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any, Literal

from teamgraph.errors import RunConflict
from teamgraph.events import Event
from teamgraph.runtime import event_log as rl
from teamgraph.runtime.backend import LEND_WAIT_S, RECONNECT_S
from teamgraph.runtime.retention import compact
from teamgraph.runtime.runner import check_request
from teamgraph.server import repositories as repo
from teamgraph.server import tracing
from teamgraph.server.run_manager import RunManager, busy
from teamgraph.server.state import AppState
from teamgraph.status import EXECUTING, PAUSED, RunStatus
from teamgraph.storage.direct import Statement
from teamgraph.storage.models import RunRow, SessionRow
from teamgraph.storage.notify import EVENTS, Notifications
from teamgraph.storage.outages import is_outage, until_reachable

TASK = "teamgraph.execute_run"
QUEUE = "runs"
TAKEOVER_QUEUE = "runs.takeover"  # runs of dead workers: every worker keeps slots for these
Kind = Literal["start", "resume"]
_SCHEMA_LOCK = 7_421_337  # advisory lock: one process creates the queue's tables


class RunQueue:
    """A procrastinate app on ``url``: :meth:`defer` from API processes, workers run its jobs.

    Its connector rides out database outages: every query is tried again until the database
    answers (:func:`~teamgraph.storage.outages.until_reachable`) and LISTEN reconnects, so a
    worker's fetch loop, heartbeat and listener survive a restart instead of stopping the
    worker; its pool checks a connection before lending it."""

    def __init__(self, url: str, pool_size: int = 4) -> None:
        from procrastinate import App

        self.url = url
        connector = _connector_class()(
            conninfo=url,
            min_size=1,
            max_size=pool_size,
            timeout=LEND_WAIT_S,
            reconnect_timeout=RECONNECT_S,
        )
        self.app = App(connector=connector)

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


@functools.cache
def _connector_class() -> type[Any]:
    """procrastinate's psycopg connector, each query retried through outages (procrastinate
    is imported only where a queue is used)."""
    from procrastinate import PsycopgConnector
    from procrastinate.sql import queries

    fetch, ended = queries["fetch_job"], (queries["finish_job"], queries["retry_job"])

    class OutageProofConnector(PsycopgConnector):
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.delivered: set[int] = set()  # jobs its fetches handed to this process's workers

        async def execute_query_async(self, query: Any, **arguments: Any) -> None:
            if query in ended:
                self.delivered.discard(arguments["job_id"])
            run = super().execute_query_async
            await until_reachable(lambda: run(query, **arguments), what="a queue query")

        async def execute_query_one_async(self, query: Any, **arguments: Any) -> Any:
            if query == fetch:
                return await self._fetch(query, arguments)
            run = super().execute_query_one_async
            return await until_reachable(lambda: run(query, **arguments), what="a queue query")

        async def _fetch(self, query: str, arguments: dict[str, Any]) -> Any:
            run, write = super().execute_query_one_async, super().execute_query_async
            worker = arguments["worker_id"]
            return await _fetched(
                lambda: run(query, **arguments),
                lambda: write(_GIVE_BACK, worker_id=worker, kept=list(self.delivered)),
                self.delivered,
            )

        async def execute_query_all_async(self, query: Any, **arguments: Any) -> Any:
            run = super().execute_query_all_async
            return await until_reachable(lambda: run(query, **arguments), what="a queue query")

        async def listen_notify(self, on_notification: Any, channels: Any) -> None:
            listen = super().listen_notify
            while True:  # returns only when cancelled; reconnects after an outage
                await until_reachable(lambda: listen(on_notification, channels), what="LISTEN")

    return OutageProofConnector


async def _fetched(
    fetch: Callable[[], Awaitable[Any]],
    give_back: Callable[[], Awaitable[None]],
    delivered: set[int],
) -> Any:
    """A job for a worker (``fetch``), fetched through outages, its id added to ``delivered``.
    A fetch whose answer an outage lost may have taken a job all the same — ``doing``, for a
    worker that never heard of it, so no heartbeat check would ever retry it: before trying
    again, such jobs (the worker's ``doing`` jobs not in ``delivered``) are given back to the
    queue (``give_back``)."""
    lost = False

    async def attempt() -> Any:
        nonlocal lost
        if lost:
            await give_back()
        try:
            return await fetch()
        except Exception as exc:
            lost = lost or is_outage(exc)
            raise

    row = await until_reachable(attempt, what="fetching a job")
    if row["id"] is not None:
        delivered.add(row["id"])
    return row


_GIVE_BACK = (  # a worker's jobs taken by fetches whose answers were lost: queued again
    "SELECT procrastinate_retry_job_v2(id, now(), NULL, NULL, NULL) FROM procrastinate_jobs"
    " WHERE worker_id = %(worker_id)s AND status = 'doing' AND NOT (id = ANY(%(kept)s))"
)
CANCEL_WAIT_S = 30.0  # how long a cancel waits for the worker to stop the run
BUSY = PAUSED | EXECUTING  # a session's latest run in these: no new run in the session


class QueuedRunManager(RunManager):
    """Runs executed by workers: start and resume enqueue, events follow the database."""

    accepted: RunStatus = "pending"  # queued: a worker has yet to claim it

    def __init__(self, state: AppState, queue: RunQueue, notes: Notifications) -> None:
        super().__init__(state)
        self.queue, self.notes = queue, notes

    async def start(
        self,
        user_id: str,
        session: SessionRow,
        team_name: str,
        request: str,
        template: str | None = None,
        also: Sequence[Statement] = (),
    ) -> str:
        """Store the run (``pending``), its user's message and ``also`` in one transaction, then
        enqueue it; returns its id."""
        check_request(request)
        runner = self.runner(team_name)
        run_id = uuid.uuid4().hex
        row = runner.run_row(request, run_id, session.id, template, user_id, session_id=session.id)
        message = repo.message(session.id, "user", request, run_id)
        with tracing.span("run.queue", run_id, team=team_name, kind="start"):
            store = self.state.backend.runs
            pending = {**row, "status": "pending"}
            if (latest := await store.create(pending, message, *also, unless=BUSY)) is not None:
                raise busy(latest)  # paused, queued or executing: one run at a time
            await self.queue.defer(run_id, "start", tracing.carrier())
        return run_id

    async def resume(self, run_id: str, answer: str | None = None, **reply: Any) -> RunRow:
        """Check and keep the reply (a wrong one is refused here, not in the worker), store the
        user's answer, and enqueue the run again; returns its row as it was before."""
        store = self.state.backend.runs
        row = await store.get(run_id)
        if row.status in EXECUTING:
            raise RunConflict("the run is running")
        runner = self.runner(row.team_name)
        await runner.keep_reply(run_id, answer=answer, **reply)
        if answer:
            session_id = row.session_id or row.thread_id
            await repo.add_message(self.state.backend.direct, session_id, "user", answer, run_id)
        with tracing.span("run.queue", run_id, team=row.team_name, kind="resume"):
            await store.update(run_id, status="pending", cancel_requested=False)
            await self.queue.defer(run_id, "resume", tracing.carrier())
        return row

    async def cancel(self, run_id: str) -> str:
        """A queued run is cancelled at once; a running one is asked to stop (its worker hears
        it through NOTIFY) and this waits until it has; a paused one is closed."""
        store = self.state.backend.runs
        row = await store.get(run_id)
        if row.status in PAUSED:
            await store.cancel_stored(run_id, "cancelled while paused")
            await compact(
                self.state.backend, self.state.settings, run_id, row.thread_id, "cancelled"
            )
        elif row.status in EXECUTING:
            if not await store.cancel_if_queued(run_id, "cancelled"):
                await self._stop_remote(run_id)
        else:
            raise RunConflict(f"the run is not running (status {row.status!r})")
        return (await store.get(run_id)).status

    def owner(self, run_id: str) -> str | None:
        return None  # no run executes here: the routes check owners in the database

    def live_in(self, session_id: str) -> str | None:
        return None

    def batches(self, run_id: str, after_seq: int = 0) -> AsyncGenerator[list[Event], None]:
        return rl.follow(self.state.backend.runs, self.notes, run_id, after_seq)

    async def shutdown(self) -> None:
        """Nothing executes here: the runs go on in the workers."""

    async def _stop_remote(self, run_id: str) -> None:
        store = self.state.backend.runs
        with self.notes.subscribe(EVENTS, run_id) as stored:
            await store.request_cancel(run_id)
            loop = asyncio.get_running_loop()
            until = loop.time() + CANCEL_WAIT_S
            while (await store.get(run_id)).status in EXECUTING:
                if loop.time() > until:
                    raise RunConflict("cancel requested: the run has not stopped yet; try again")
                with suppress(TimeoutError):
                    await asyncio.wait_for(stored.get(), 0.5)
