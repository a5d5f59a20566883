"""Capacity check: procrastinate's tables with 10,000 runs queued (issue 34, docs/deploy.md).

On a fresh PostgreSQL database, through teamgraph's own :class:`RunQueue` (the API's
``defer``): ``--jobs`` runs are queued one by one by ``--clients`` concurrent callers (the
enqueue rate and this process's CPU per enqueue), then jobs are claimed one at a time with the
queue ``--jobs`` deep (procrastinate's ``fetch_job``, what a worker's claim loop calls:
p50/p99 ms and the database's CPU per claim), and again when the queue is nearly drained.

Run ``python benchmarks/queue_depth.py`` (≈ 1 minute) or ``--jobs 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ADMIN, _cpu_s  # the benchmark next to this one
from server import percentile
from teamgraph.server.queue import QUEUE, RunQueue


def _backends(admin: str, name: str) -> list[int]:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchall()
    return [int(row[0]) for row in rows]


def _cpu(admin: str, name: str) -> tuple[float, float]:
    """CPU seconds so far: this process, and the database's server processes."""
    import os

    return _cpu_s(os.getpid()), sum(_cpu_s(pid) for pid in _backends(admin, name))


async def claims(queue: RunQueue, worker: int, times: int) -> list[float]:
    took: list[float] = []
    for _ in range(times):
        start = time.perf_counter()
        job = await queue.app.job_manager.fetch_job(queues=[QUEUE], worker_id=worker)
        took.append((time.perf_counter() - start) * 1000)
        if job is None:
            break
    return took


async def benchmark(args: argparse.Namespace) -> int:
    import psycopg

    name = f"tg_bench_{uuid.uuid4().hex[:8]}"
    url = args.admin_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        async with RunQueue(url, pool_size=2) as queue:
            ids = [str(uuid.uuid4()) for _ in range(args.jobs)]
            cpu0, pg0 = _cpu(args.admin_url, name)
            start = time.perf_counter()

            async def client(part: list[str]) -> None:
                for run_id in part:
                    await queue.defer(run_id, "start")

            await asyncio.gather(*(client(ids[i :: args.clients]) for i in range(args.clients)))
            wall = time.perf_counter() - start
            cpu1, pg1 = _cpu(args.admin_url, name)
            print(
                f"enqueue {args.jobs} jobs by {args.clients} clients:"
                f" {args.jobs / wall:.0f} jobs/s;"
                f" CPU per enqueue: client {(cpu1 - cpu0) * 1000 / args.jobs:.2f} ms,"
                f" PostgreSQL {(pg1 - pg0) * 1000 / args.jobs:.2f} ms",
                flush=True,
            )
            print(f"queue depth {await queue.depth()}", flush=True)
            worker = await queue.app.job_manager.register_worker()
            cpu0, pg0 = _cpu(args.admin_url, name)
            deep = await claims(queue, worker, args.claims)
            cpu1, pg1 = _cpu(args.admin_url, name)
            print(
                f"claim with {args.jobs} queued: p50 {percentile(deep, 50):.2f} ms,"
                f" p99 {percentile(deep, 99):.2f} ms; PostgreSQL CPU per claim"
                f" {(pg1 - pg0) * 1000 / len(deep):.2f} ms",
                flush=True,
            )
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(
                    "UPDATE procrastinate_jobs SET status = 'succeeded'"
                    " WHERE status = 'todo' AND id NOT IN"
                    " (SELECT id FROM procrastinate_jobs WHERE status = 'todo' LIMIT %s)",
                    (args.claims,),
                )
            shallow = await claims(queue, worker, args.claims)
            print(
                f"claim with {args.claims} queued ({args.jobs} rows in the table):"
                f" p50 {percentile(shallow, 50):.2f} ms, p99 {percentile(shallow, 99):.2f} ms",
                flush=True,
            )
    finally:
        with psycopg.connect(args.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--admin-url", default=ADMIN, help="A PostgreSQL database to create from.")
    return asyncio.run(benchmark(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
