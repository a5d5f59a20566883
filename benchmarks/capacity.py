"""The capacity model's two riskiest numbers (docs/deploy.md, "What limits this design"), simulated
on this machine with real processes on PostgreSQL:

* ``followers``: many streams following live runs through one API process. ``--runs`` slow runs
  (a workflow whose offline model takes ``--latency`` s a call) execute on one worker while
  ``--followers`` clients (spread evenly over the runs) read their event streams. Every event
  reaches the API process as a NOTIFY (carrying the batch when it fits) and is written to every
  follower of its run. Printed: streams that ended complete (every event of the run, in order,
  none twice — compared with the stored events), the delivery lag from an event's ``ts`` (set
  when the worker emits it) to its arrival at a follower (p50/p99/max), the API process's CPU
  per delivered event and per stream, and the database connections of the deployment at peak;
  and, as the baseline measured in the same run, the same figures with one follower per run.
* ``queue``: a deep queue. ``--queued`` runs are started through the API with no worker running
  (each is a run row and a procrastinate job), then one worker drains them. Printed: starts/s
  and start latency p50/p99 for the first and the last 500 starts (does a deep queue slow the
  start path?), the size of the queue's and runs' tables, the time of procrastinate's claim
  query (``procrastinate_fetch_job_v2``, in a transaction rolled back) at a depth of 100 and
  of ``--queued`` jobs, and the drain rate with the backlog against the worker's rate measured
  on a short queue in the same run.

Needs PostgreSQL (``--admin-url``, default the local server; each simulation makes and drops a
database of its own). Run ``python benchmarks/capacity.py`` (≈ 6 minutes) or ``--quick``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ADMIN, Deployment, _cpu_s, throughput  # the benchmarks next to this one
from server import EVENTS, Api, BenchmarkError, RawClient, percentile, write_team

TICKER = """\
name: ticker
description: A workflow whose model takes {latency} s a call, so its runs stay live a while.
pattern: workflow
model: offline
model_kwargs: {{latency: {latency}}}
members: [researcher, writer]
"""
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"
SMALL_POOLS = {"TEAMGRAPH_DB_POOL_SIZE": "4", "TEAMGRAPH_DB_MAX_OVERFLOW": "4"}


# --- followers ---------------------------------------------------------------------------------
class Follower:
    """One stream: the seqs it read and each event's delivery lag."""

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.lags_ms: list[float] = []
        self.error = ""


async def follow(api: Api, base: str, run_id: str, into: Follower) -> None:
    """Read the run's stream to its end by hand (:class:`server.RawClient`: an httpx stream
    costs the client enough CPU, at hundreds of streams, to show up as delivery lag)."""
    headers = {**api.headers, "Accept": "text/event-stream"}
    try:
        client = await RawClient.connect(base)
        client.send("GET", EVENTS.format(run_id=run_id), headers)
        status, _ = await client.head()
        if status != 200:
            into.error = f"HTTP {status}"
            return
        rest = ""
        async for chunk in client.chunks():
            now = time.time()
            *lines, rest = (rest + chunk.decode()).split("\n")
            for line in lines:
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    into.seqs.append(int(event["seq"]))
                    lag = now - datetime.fromisoformat(event["ts"]).timestamp()
                    into.lags_ms.append(lag * 1000)
        client.close()
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        into.error = f"{type(exc).__name__}: {exc}"


async def followers(args: argparse.Namespace, teams: Path, root: Path, per_run: int) -> None:
    env = {**SMALL_POOLS, "TEAMGRAPH_WORKER_CONCURRENCY": str(args.runs)}
    with Deployment(args.admin_url, teams, root, **env) as deployment:
        deployment.serve(1)
        await deployment.ready()
        limits = httpx.Limits(max_connections=args.runs * per_run + 20)
        async with httpx.AsyncClient(base_url=deployment.api, limits=limits, timeout=600) as http:
            api = await Api.login(http)
            sessions = [await api.session("ticker") for _ in range(args.runs)]
            api_pid = next(p.pid for p in deployment.processes if p.pid not in deployment.workers)
            cpu_before = _cpu_s(api_pid)
            wall, client = time.monotonic(), time.process_time()
            peak = _Peak(deployment)
            streams: list[tuple[str, Follower]] = []
            tasks = []
            for session in sessions:
                run_id = await _start(api, session, REQUEST)
                for _ in range(per_run):
                    streams.append((run_id, follower := Follower()))
                    tasks.append(asyncio.create_task(follow(api, deployment.api, run_id, follower)))
            async with peak:
                await asyncio.gather(*tasks)
            cpu_ms = (_cpu_s(api_pid) - cpu_before) * 1000
            wall, client = time.monotonic() - wall, time.process_time() - client
        stored = await _stored_seqs(deployment.url)
    _report_followers(streams, stored, cpu_ms, peak.connections, per_run)
    print(
        f"{'':<10}over {wall:.1f} s: API process CPU {cpu_ms / 1000:.1f} s, this client's "
        f"{client:.1f} s",
        flush=True,
    )


async def _start(api: Api, session: str, request: str) -> str:
    response = await api.http.post(
        f"/api/v1/sessions/{session}/runs", json={"input": request}, headers=api.headers
    )
    if response.status_code not in (200, 201, 202):
        raise BenchmarkError(f"start: HTTP {response.status_code} {response.text[:200]}")
    run_id: str = response.json()["run_id"]
    return run_id


class _Peak:
    """The most connections the deployment's database had, sampled every 0.5 s."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment, self.connections = deployment, 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self._task = asyncio.create_task(self._sample())

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _sample(self) -> None:
        while True:
            count = await asyncio.to_thread(lambda: len(self.deployment.backends()))
            self.connections = max(self.connections, count)
            await asyncio.sleep(0.5)


async def _stored_seqs(url: str) -> dict[str, list[int]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        rows = await (await conn.execute("SELECT run_id, seq FROM events ORDER BY seq")).fetchall()
    stored: dict[str, list[int]] = {}
    for run_id, seq in rows:
        stored.setdefault(run_id, []).append(int(seq))
    return stored


def _report_followers(
    streams: Sequence[tuple[str, Follower]],
    stored: dict[str, list[int]],
    cpu_ms: float,
    connections: int,
    per_run: int,
) -> None:
    complete = sum(1 for run_id, f in streams if f.seqs == stored.get(run_id) and not f.error)
    errors = [f.error for _, f in streams if f.error]
    lags = [lag for _, f in streams for lag in f.lags_ms]
    delivered = sum(len(f.seqs) for _, f in streams)
    print(
        f"followers {len(streams)} ({per_run} per run): complete {complete}/{len(streams)}, "
        f"errors {len(errors)}{' (' + errors[0] + ')' if errors else ''}; "
        f"events delivered {delivered}; lag p50 {percentile(lags, 50):.0f} ms, "
        f"p99 {percentile(lags, 99):.0f} ms, max {max(lags, default=0):.0f} ms; "
        f"API CPU {cpu_ms / max(delivered, 1) * 1000:.0f} µs/event, "
        f"{cpu_ms / len(streams):.1f} ms/stream; database connections at peak {connections}",
        flush=True,
    )


# --- a deep queue ------------------------------------------------------------------------------
async def queue(args: argparse.Namespace, teams: Path, root: Path) -> None:
    with Deployment(args.admin_url, teams, root, **SMALL_POOLS) as deployment:
        deployment.serve(0)  # API only: nothing claims the runs yet
        await deployment.ready()
        limits = httpx.Limits(max_connections=40)
        async with httpx.AsyncClient(base_url=deployment.api, limits=limits, timeout=120) as http:
            api = await Api.login(http)
            shallow = await _started(api, 100, args.concurrency)
            claim_shallow = await _claim_times(deployment.url)
            deep = await _started(api, args.queued - 100, args.concurrency)
            claim_deep = await _claim_times(deployment.url)
            await _analyze(deployment.url)  # what autovacuum does (off on the CI machine)
            claim_analyzed = await _claim_times(deployment.url)
            sizes = await _sizes(deployment.url)
            deployment.worker()
            await deployment.ready()
            drained = await _drain_rate(deployment.url, args.drain_s)
    first, last = shallow.latencies + deep.latencies[:400], deep.latencies[-500:]
    print(
        f"queue: {args.queued} runs started with no worker at {deep.rate:.0f} sessions+starts/s; "
        f"start latency first 500 {_ms(first)}, last 500 {_ms(last)}",
        flush=True,
    )
    print(f"queue: tables at {args.queued} queued: {sizes}", flush=True)
    print(
        f"queue: claim query (procrastinate_fetch_job_v2) at depth 100 {_ms(claim_shallow)}, "
        f"at depth {args.queued} {_ms(claim_deep)} with the statistics of a short queue, "
        f"{_ms(claim_analyzed)} once analyzed",
        flush=True,
    )
    short, _, _ = await throughput(
        args.admin_url, teams, root, 1, argparse.Namespace(runs=150, concurrency=20)
    )
    print(
        f"queue: one worker drains the backlog at {drained:.1f} runs/s; on a short queue "
        f"(20 clients, 150 runs) {short:.1f} runs/s",
        flush=True,
    )


class Started:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.rate = 0.0


async def _started(api: Api, count: int, concurrency: int) -> Started:
    """``count`` runs started, each on a session of its own (a session runs one at a time):
    the start request's latency is timed, not the session's."""
    started, left = Started(), iter(range(count))
    began = time.perf_counter()

    async def client() -> None:
        for _ in left:
            session = await api.session()
            at = time.perf_counter()
            await _start(api, session, "Benchmark request: compare two options.")
            started.latencies.append((time.perf_counter() - at) * 1000)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    started.rate = count / (time.perf_counter() - began)
    return started


async def _claim_times(url: str, times: int = 200) -> list[float]:
    """Ms of procrastinate's claim of the next job, each in a transaction rolled back (the
    queue is left as it was), by a registered worker id of its own."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (
            await conn.execute("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id")
        ).fetchone()
        await conn.commit()
        assert row is not None
        worker_id, took = row[0], []
        for _ in range(times):
            at = time.perf_counter()
            found = await (
                await conn.execute(
                    "SELECT id FROM procrastinate_fetch_job_v2(%s, %s)", (["runs"], worker_id)
                )
            ).fetchone()
            took.append((time.perf_counter() - at) * 1000)
            await conn.rollback()
            if found is None or found[0] is None:
                raise BenchmarkError("the claim query found no job: is the queue named 'runs'?")
        await conn.execute("DELETE FROM procrastinate_workers WHERE id = %s", (worker_id,))
        await conn.commit()
    return took


async def _analyze(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("ANALYZE procrastinate_jobs")


async def _sizes(url: str) -> str:
    import psycopg

    tables = ("procrastinate_jobs", "procrastinate_events", "runs", "events")
    async with await psycopg.AsyncConnection.connect(url) as conn:
        parts = []
        for table in tables:
            row = await (
                await conn.execute(
                    f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}"
                )
            ).fetchone()
            assert row is not None
            parts.append(f"{table} {row[0]} rows {row[1] / 1e6:.1f} MB")
    return ", ".join(parts)


async def _drain_rate(url: str, seconds: float) -> float:
    """Runs completed per second by the worker over ``seconds``, after its first completion."""
    import psycopg

    query = "SELECT count(*) FROM runs WHERE status = 'completed'"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:

        async def done() -> int:
            row = await (await conn.execute(query)).fetchone()
            return int(row[0]) if row else 0

        deadline = time.monotonic() + 120
        while (first := await done()) == 0:
            if time.monotonic() > deadline:
                raise BenchmarkError("the worker completed no run in 2 minutes")
            await asyncio.sleep(0.2)
        began = time.monotonic()
        await asyncio.sleep(seconds)
        return (await done() - first) / (time.monotonic() - began)


def _ms(values: list[float]) -> str:
    if not values:
        return "—"
    return f"p50 {statistics.median(values):.1f} ms, p99 {percentile(values, 99):.1f} ms"


# --- main --------------------------------------------------------------------------------------
async def benchmark(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="teamgraph-capacity-") as tmp:
        root = Path(args.logs or tmp)
        teams = write_team(root)
        (teams / "ticker.yaml").write_text(TICKER.format(latency=args.latency))
        if "followers" in args.only:
            await followers(args, teams, root, 1)  # the baseline: one follower per run
            await followers(args, teams, root, args.followers // args.runs)
        if "queue" in args.only:
            await queue(args, teams, root)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", default=ADMIN)
    parser.add_argument("--runs", type=int, default=25, help="live runs the followers follow")
    parser.add_argument("--followers", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.5, help="s per model call")
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=20, help="clients starting runs")
    parser.add_argument("--drain-s", type=float, default=30.0)
    parser.add_argument("--only", nargs="+", default=["followers", "queue"])
    parser.add_argument("--logs", help="keep the processes' logs in this folder")
    parser.add_argument("--quick", action="store_true", help="100 followers, 1,000 queued")
    args = parser.parse_args(argv)
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.runs, args.followers, args.queued, args.drain_s = 10, 100, 1_000, 10.0
    return asyncio.run(benchmark(args))


if __name__ == "__main__":
    raise SystemExit(main())
