"""``teamgraph worker``: a process that executes queued runs (no HTTP API).

Each job names a run. The worker takes the run's lease (one executor per run: two workers never
execute it at once), renews it every third of ``lease_ttl_s`` while the run executes, listens
for a cancel (NOTIFY), and releases it at the end. Its writes to the run's row are fenced by the
lease: a worker that lost its lease (paused longer than the TTL) stops and writes nothing more.

Recovery needs no human: every ``worker_heartbeat_s`` each worker retries the jobs of workers
whose procrastinate heartbeat is older than ``worker_stalled_s`` (killed, frozen, cut off) —
unless the run's lease is still being renewed (its worker is alive: draining, or its heartbeat
was delayed) — into the takeover queue, which every worker serves with
``worker_takeover_slots`` slots of its own (a full worker still takes orphans over); and it
re-queues stored runs whose job was lost. The run continues from its last checkpoint; finished
steps, model replies and approved tool calls are replayed from the journal, never redone.

A database outage stops no worker: its queue's queries and LISTEN are retried until the database
answers (:class:`~teamgraph.server.queue.RunQueue`), a lease renewal that fails is tried again
at the next renewal (the lease outlives a short outage), and a run that an outage stopped is
resumed here, under the same lease, once the database is back (the run manager does it).

On SIGTERM the worker stops claiming, waits up to ``worker_drain_s`` for its runs, hands the
ones still running to another worker (lease released, job queued again) and exits."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from sqlalchemy.ext.asyncio import async_sessionmaker

from teamgraph.config import Settings
from teamgraph.errors import LeaseLost
from teamgraph.runtime.backend import open_backend
from teamgraph.server import tracing
from teamgraph.server.logging import bind_run
from teamgraph.server.ops import Metrics, database_problem
from teamgraph.server.queue import QUEUE, TAKEOVER_QUEUE, TASK, Kind, RunQueue
from teamgraph.server.run_manager import RunManager
from teamgraph.server.state import AppState, load_teams
from teamgraph.status import EXECUTING
from teamgraph.storage.models import RunRow, utcnow
from teamgraph.storage.notify import CONTROL, Notifications
from teamgraph.storage.outages import is_outage, until_reachable

log = logging.getLogger(__name__)
CLAIM_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
POLL_S = 1.0  # a worker also looks for jobs this often (a NOTIFY missed while LISTEN reconnects)


class WorkerMetrics:
    """A worker's own Prometheus metrics (beside the run metrics every process has)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.claims = Histogram(
            "teamgraph_worker_claim_seconds",
            "From a run being queued to a worker holding it.",
            buckets=CLAIM_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "teamgraph_worker_runs_in_flight", "Runs executing here.", registry=registry
        )
        self.renewals = Counter(
            "teamgraph_worker_lease_renewals", "Lease renewals.", registry=registry
        )
        self.recoveries = Counter(
            "teamgraph_worker_recoveries", "Runs of dead workers queued again.", registry=registry
        )
        self.queue_depth = Gauge(
            "teamgraph_queue_depth", "Runs waiting for a worker.", registry=registry
        )


@dataclass
class Worker:
    """One worker process: ``await Worker(settings).run()`` until SIGTERM/SIGINT."""

    settings: Settings
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False
    handed: list[str] = field(default_factory=list)  # runs given to other workers on drain

    mine: dict[str, asyncio.Event] = field(default_factory=dict)  # runs a job here claims/runs

    def __post_init__(self) -> None:
        self.settings.require_postgres("teamgraph worker")
        self.owner = f"{self.name}:{uuid.uuid4().hex[:8]}"  # this process's lease owner id
        self.metrics = Metrics()
        self.own = WorkerMetrics(self.metrics.registry)

    async def run(self) -> None:
        tracing.configure(self.settings, "worker")
        async with AsyncExitStack() as stack:
            backend = await stack.enter_async_context(open_backend(self.settings))
            sessions = async_sessionmaker(backend.engine, expire_on_commit=False)
            teams = load_teams(self.settings)
            slots = self.settings.worker_concurrency + self.settings.worker_takeover_slots
            settings = self.settings.model_copy(  # every claimed run executes at once
                update={"max_concurrent_runs": slots}
            )
            self.state = AppState(settings, backend, teams, sessions, self.metrics)
            self.state.runs = self.manager = RunManager(self.state)
            stack.push_async_callback(self.manager.shutdown)
            self.queue = await stack.enter_async_context(RunQueue(self.settings.postgres_url))
            self.notes = Notifications(self.settings.postgres_url, (CONTROL,))
            await self.notes.start()
            stack.push_async_callback(self.notes.close)
            self.queue.app.task(name=TASK, queue=QUEUE, pass_context=True)(self._job)
            takeovers = asyncio.create_task(self._take_overs())
            stack.callback(takeovers.cancel)
            if self.settings.worker_health_port:
                server = await asyncio.start_server(
                    self._health, "0.0.0.0", self.settings.worker_health_port
                )
                stack.push_async_callback(server.wait_closed)
                stack.callback(server.close)
            sweeper = asyncio.create_task(self._sweep())
            stack.callback(sweeper.cancel)
            self.ready.set()
            log.info(
                "worker %s ready (concurrency %d)", self.name, self.settings.worker_concurrency
            )
            await self._claiming(QUEUE, self.settings.worker_concurrency, signals=True)
            takeovers.cancel()
            with suppress(asyncio.CancelledError):
                await takeovers
            if self.handed:  # their tasks still run here: stop at once, as a crash would
                log.warning("drained: runs %s handed to other workers", ", ".join(self.handed))
                logging.shutdown()
                os._exit(0)

    async def _claiming(self, queue: str, concurrency: int, signals: bool = False) -> None:
        """A procrastinate worker on ``queue`` (the one with ``signals`` drains on SIGTERM)."""
        await self.queue.app.run_worker_async(
            queues=[queue],
            name=self.name if signals else f"{self.name}:takeover",
            concurrency=concurrency,
            fetch_job_polling_interval=POLL_S,
            update_heartbeat_interval=self.settings.worker_heartbeat_s,
            stalled_worker_timeout=self.settings.worker_stalled_s,
            shutdown_graceful_timeout=self.settings.worker_drain_s,
            delete_jobs="successful",
            install_signal_handlers=signals,
            wait=True,
        )

    async def _take_overs(self) -> None:
        """The takeover queue's worker: ``worker_takeover_slots`` slots of its own."""
        await self._claiming(TAKEOVER_QUEUE, self.settings.worker_takeover_slots)

    # --- one job: one run --------------------------------------------------------------------
    async def _job(
        self, context: Any, run_id: str, kind: Kind, trace: dict[str, str] | None = None
    ) -> None:
        """One job: the run's span, in the trace of the API process that queued it, with the
        run's id on every log line written while it executes."""
        with (
            bind_run(run_id),
            tracing.span("run.execute", run_id, parent=trace, kind=kind, worker=self.name),
        ):
            await self._run(run_id, kind)

    async def _run(self, run_id: str, kind: Kind) -> None:
        while (earlier := self.mine.get(run_id)) is not None:
            await earlier.wait()  # a second job for a run a job here claimed (a resume queued as
            # the run paused): once that job has let the run go, it is claimed as any job is —
            # the run's status under the new lease says whether anything is left to do
        done = self.mine[run_id] = asyncio.Event()
        try:
            row = await until_reachable(lambda: self._claim(run_id), what=f"claiming {run_id}")
            if row is not None:  # else a live worker holds it: that one executes the run
                await self._fenced(row, kind)
        finally:
            del self.mine[run_id]
            done.set()

    async def _fenced(self, row: RunRow, kind: Kind) -> None:
        """Execute the run (``row``: read with its lease taken) under that lease, then let it go
        (or hand it over)."""
        store = self.state.backend.runs
        run_id, epoch = row.id, row.lease_epoch
        store.fence(run_id, self.owner, epoch)
        self.own.in_flight.inc()
        try:
            if row.status not in EXECUTING:
                return  # ended, paused or cancelled while it waited
            self.own.claims.observe(_since(row.updated_at))
            if row.cancel_requested:
                await store.cancel_stored(run_id, "cancelled")
                return
            await self._execute(row, kind, epoch)
        except LeaseLost:  # another worker took it over (this one was frozen): it goes on there
            return
        except asyncio.CancelledError:  # drained past worker_drain_s: another worker goes on
            await self._hand_over(run_id, epoch)
            raise
        except Exception:  # nothing more of it runs here: a lapsed lease lets another resume it
            store.abandon(run_id)
            await self.manager.let_go(run_id)
            raise
        finally:
            self.own.in_flight.dec()
            if run_id not in self.handed:
                store.unfence(run_id)
                with suppress(Exception):
                    await store.release_lease(run_id, self.owner, epoch)

    async def _claim(self, run_id: str) -> RunRow | None:
        """The run's lease — at once, once its holder lets it go, or once a dead holder's has
        lapsed — and its row as it stands under it (``None``: its holder renews it while the run
        executes — alive, it executes the run). A run stored ``pending`` under a live holder's
        lease is one the holder has finished executing (a resume was queued as the run paused,
        while the holder compacts and lets it go): that lease is waited for, renewed or not. It
        is looked at again after 50 ms, then twice as long each time, up to a third of the
        lease."""
        store = self.state.backend.runs
        ttl = self.settings.lease_ttl_s
        seen: Any = None
        wait = 0.05
        while (taken := await store.take_lease(run_id, self.owner, ttl)) is None:
            row = await store.get(run_id)
            if row.lease_owner == self.owner:  # ours: an outage lost the answer to our take
                return row  # (no other job of this process claims it)
            if row.lease_until is None:
                continue  # released just now
            if seen is not None and row.lease_until != seen and row.status != "pending":
                return None  # renewed while we waited: its holder is alive and executes it
            seen = row.lease_until
            await asyncio.sleep(min(wait, max(0.05, _until(row.lease_until))))
            wait = min(wait * 2, ttl / 3)
        return taken

    async def _execute(self, row: RunRow, kind: Kind, epoch: int) -> None:
        await until_reachable(lambda: self._begin(row, kind), what=f"starting run {row.id}")
        store = self.state.backend.runs
        ttl = self.settings.lease_ttl_s
        with self.notes.subscribe(CONTROL, row.id) as control:
            done = asyncio.create_task(self.manager.finished(row.id))
            while not done.done():
                heard = asyncio.create_task(control.get())
                await asyncio.wait({done, heard}, timeout=ttl / 3, return_when="FIRST_COMPLETED")
                heard.cancel()
                if done.done():
                    break
                try:
                    asked = await store.renew_lease(row.id, self.owner, epoch, ttl)
                except Exception as exc:
                    if not is_outage(exc):
                        raise
                    log.warning("could not renew the lease on run %s (%s); retrying", row.id, exc)
                    continue  # tried again a third of the TTL later: the lease outlives it
                self.own.renewals.inc()
                if asked is None:
                    log.warning("lost the lease on run %s: another worker has it", row.id)
                    store.abandon(row.id)  # nothing more of it reaches the database
                    await self.manager.let_go(row.id)  # nor is it resumed here after an outage
                    raise LeaseLost(f"run {row.id} was taken over")
                if asked:
                    await self.manager.cancel(row.id)
            await done

    async def _begin(self, row: RunRow, kind: Kind) -> None:
        """Start the stored run, or resume it from its last checkpoint (a resume, a run its dead
        worker had started, or a start an outage interrupted: repeating this is safe)."""
        if kind == "start" and row.status == "pending":
            await self.state.backend.runs.update(row.id, status="running")
            await self.manager.start_stored(row)
        else:
            await self.manager.resume(row.id)
        row.status = "running"  # tried again after an outage: the run has begun, resume it

    async def _hand_over(self, run_id: str, epoch: int) -> None:
        """Give a run this worker cannot finish to another: nothing more of it is written from
        here, its lease is released and it is queued again (the process exits right after)."""
        self.handed.append(run_id)
        store = self.state.backend.runs
        store.abandon(run_id)
        with suppress(Exception):
            await store.release_lease(run_id, self.owner, epoch)
            await self.queue.defer(run_id, "resume")

    # --- recovery ------------------------------------------------------------------------------
    async def _sweep(self) -> None:
        """Retry the jobs of dead workers, re-queue stored runs whose job was lost."""
        manager = self.queue.app.job_manager
        while True:
            await asyncio.sleep(self.settings.worker_heartbeat_s)
            try:
                for queue in (QUEUE, TAKEOVER_QUEUE):
                    stalled = await manager.get_stalled_jobs(
                        queue=queue, seconds_since_heartbeat=self.settings.worker_stalled_s
                    )
                    for job in stalled:
                        await self._take_over(job)
                await manager.prune_stalled_workers(self.settings.worker_stalled_s)
                await self._requeue_orphans()
                self.own.queue_depth.set(await self.queue.depth())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_outage(exc):  # the database is unreachable: the next sweep tries again
                    log.warning("the recovery sweep waits for the database (%s)", exc)
                else:
                    log.exception("the recovery sweep failed; trying again")

    async def _take_over(self, job: Any) -> None:
        """Retry a stalled job in the takeover queue — unless its run's lease is still being
        renewed: its worker is alive (draining, or its heartbeat was late), not gone."""
        run_id = job.task_kwargs["run_id"]
        if run_id in self.mine:
            return  # it executes here: this worker is alive (its heartbeat was late)
        row = await self.state.backend.runs.get(run_id)
        if row.lease_until is not None and _until(row.lease_until) > 0:
            return
        log.warning("run %s: its worker is gone; taking it over", run_id)
        try:
            await self.queue.app.job_manager.retry_job(job, queue=TAKEOVER_QUEUE)
        except Exception as exc:  # e.g. a job for the run is queued already (queueing lock)
            log.warning("run %s: not retried (%s); a queued job will take it", run_id, exc)
            return
        self.own.recoveries.inc()

    async def _requeue_orphans(self) -> None:
        """Queue the stored runs no worker will execute (``RunStore.orphans``: never queued,
        or left ``running`` with a lapsed lease and no job); a job already waiting for one
        makes this a no-op."""
        idle_since = utcnow() - timedelta(seconds=self.settings.worker_stalled_s)
        for row in await self.state.backend.runs.orphans(idle_since):
            fresh = row.status == "pending" and row.lease_epoch == 0
            await self.queue.defer(row.id, "start" if fresh else "resume")

    # --- health --------------------------------------------------------------------------------
    async def _health(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """``/health`` (alive), ``/ready`` (claiming runs), ``/metrics`` (Prometheus)."""
        try:
            line = (await reader.readline()).decode("latin-1").split()
            path = line[1] if len(line) > 1 else "/"
            if path == "/metrics":
                status, body = "200 OK", generate_latest(self.metrics.registry)
            elif path == "/health":
                status, body = "200 OK", b'{"status":"ok","role":"worker"}'
            elif path == "/ready":  # claiming, and the database answers
                ready = self.ready.is_set() and not self.draining
                ready = ready and await database_problem(self.state.backend.engine) is None
                status = "200 OK" if ready else "503 Service Unavailable"
                body = b'{"ready":true}' if ready else b'{"ready":false}'
            else:
                status, body = "404 Not Found", b"{}"
            head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        finally:
            writer.close()


def _since(moment: datetime) -> float:
    """Seconds from ``moment`` (a stored UTC time) to now."""
    return max(0.0, (utcnow() - _aware(moment)).total_seconds())


def _until(moment: datetime) -> float:
    return max(0.0, (_aware(moment) - utcnow()).total_seconds())


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def run_worker(settings: Settings) -> None:
    """``teamgraph worker``: run until SIGTERM/SIGINT (JSON logs when enabled)."""
    from contextlib import nullcontext

    from teamgraph.server.logging import json_logging, json_logs_enabled

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    started = time.monotonic()
    with json_logging() if json_logs_enabled(settings) else nullcontext():
        _event_loop_runner()(Worker(settings).run())
    log.info("worker stopped after %.0f s", time.monotonic() - started)


def _event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop where it is installed, as ``teamgraph serve`` runs (uvicorn picks it): a run's
    every database round trip waits on the loop, and uvloop waits for less CPU than asyncio's
    own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run
