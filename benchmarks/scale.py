"""Scale-out benchmark: API-only processes and ``teamgraph worker`` processes on PostgreSQL.

On one fresh PostgreSQL database per configuration, with the 4-step offline team of
``benchmarks/server.py`` (``a`` → ``b``, ``c`` → ``d``), ``--runs`` runs by ``--concurrency``
clients, each started through ``POST …/runs`` and followed on ``GET …/events`` to its end:

* ``in-process``: ``teamgraph serve`` as shipped (runs execute in the API process) — the baseline;
* ``1 API + 1 worker`` and ``1 API + 2 workers``: ``serve --workers 0`` and worker processes.

Printed per configuration: runs/s and its ratio to the in-process server and to one worker,
CPU milliseconds per run of the API process, the workers and the database's server processes
(``/proc``, over the measured runs);
claim latency (from the run's row made by the API to its ``run_started`` event emitted by a
worker: queue, NOTIFY, claim, lease, status, first event) p50/p99. Then the takeover: a run of
a slower team (0.25 s per model call) has its worker killed (``kill -9``) after its first
step; the time from the kill to the ``resumed`` event of the worker that took it over, with the
default lease and heartbeat settings (``--takeovers`` times).

Needs PostgreSQL (``--admin-url``, default the local server). Run ``python benchmarks/scale.py``
(≈ 4 minutes) or ``--quick``. The in-process layout also runs on SQLite, and the ratios R (CPU
per run, distributed ÷ in-process) and P (runs/s, in-process PostgreSQL ÷ SQLite) are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server import (  # the benchmark next to this one
    UNLIMITED,
    Api,
    BenchmarkError,
    free_port,
    percentile,
    server_throughput,
    write_team,
)

PROFILE = os.environ.get("SCALE_PROFILE_DIR", "")  # cProfile each spawned process into it
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SLOW = """\
name: slow
description: A workflow whose model takes 0.25 s a call.
pattern: workflow
model: offline
model_kwargs: {latency: 0.25}
members: [researcher, writer]
"""


class Deployment:
    """API processes and workers of one configuration on a database of their own."""

    def __init__(
        self, admin: str, teams: Path, root: Path, sqlite: bool = False, **env: str
    ) -> None:
        self.admin, self.root, self.sqlite = admin, root, sqlite
        self.name = f"tg_bench_{uuid.uuid4().hex[:8]}"
        self.url = admin.rsplit("/", 1)[0] + "/" + self.name
        if sqlite:
            self.url = f"sqlite:///{root}/{self.name}.db"
        self.env = {
            **os.environ,
            "DATABASE_URL": self.url,
            # small pools: the server's max_connections (100) is shared with other users
            "TEAMGRAPH_DB_POOL_SIZE": "2",
            "TEAMGRAPH_DB_MAX_OVERFLOW": "2",
            "TEAMGRAPH_TEAMS_DIRS": json.dumps([str(teams)]),
            "TEAMGRAPH_JWT_SECRET": uuid.uuid4().hex * 2,
            "TEAMGRAPH_KNOWLEDGE_PATH": str(root / f"{self.name}.knowledge.db"),
            "TEAMGRAPH_RATE_LIMITS": json.dumps(UNLIMITED),
            "TEAMGRAPH_JSON_LOGS": "false",
            **env,
        }
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.api = ""

    def __enter__(self) -> Deployment:
        import psycopg

        if self.sqlite:
            return self
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.sqlite:
            return
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        log = (self.root / f"{self.name}-{len(self.processes)}.log").open("ab")
        command = [sys.executable, "-m", "teamgraph", *args]
        if PROFILE:  # cProfile of every process, written when it exits (SIGTERM: a clean exit)
            out = Path(PROFILE) / f"{self.name}-{args[0]}-{len(self.processes)}.prof"
            # uvicorn re-raises the SIGTERM it caught once it has shut down: a handler that
            # exits lets cProfile write its file
            code = (
                "import cProfile, runpy, signal, sys\n"
                "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                f"sys.argv = ['teamgraph', *{list(args)!r}]\n"
                'cProfile.run(\'runpy.run_module("teamgraph", run_name="__main__")\','
                f" {str(out)!r})\n"
            )
            command = [sys.executable, "-c", code]
        process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def serve(self, workers: int | None) -> None:
        port = free_port()
        self.api = f"http://127.0.0.1:{port}"
        extra = () if workers is None else ("--workers", "0")
        self._spawn("serve", "--port", str(port), *extra)
        for _ in range(workers or 0):
            self.worker()

    def worker(self) -> None:
        process = self._spawn("worker")
        self.workers[process.pid] = process

    async def ready(self, within_s: float = 120) -> None:
        deadline = time.monotonic() + within_s
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                try:
                    if (await http.get(f"{self.api}/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)
            else:
                raise BenchmarkError(f"the API did not start; logs in {self.root}")
        while self.workers and time.monotonic() < deadline:  # every worker has registered
            if await self._registered() >= len(self.workers):
                return
            await asyncio.sleep(0.2)

    async def _registered(self) -> int:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url) as conn:
            try:
                cursor = await conn.execute("SELECT count(*) FROM procrastinate_workers")
            except psycopg.errors.UndefinedTable:
                return 0
            found = await cursor.fetchone()
            return int(found[0]) if found else 0

    async def claim_latencies(self, run_ids: list[str] | None = None) -> list[float]:
        """Ms from each run's row (its ``created_at``, set by the API) to its ``run_started``
        event (its ``ts``, set by the worker when it emits it); of ``run_ids`` when given."""
        import psycopg

        query = (
            "SELECT extract(epoch FROM ((e.data::json->>'ts')::timestamptz - r.created_at)) * 1000"
            " FROM runs r"
            " JOIN events e ON e.run_id = r.id AND e.type = 'run_started'"
        )
        async with await psycopg.AsyncConnection.connect(self.url) as conn:
            if run_ids is None:
                rows = await (await conn.execute(query)).fetchall()
            else:
                query += " WHERE r.id = ANY(%s)"
                rows = await (await conn.execute(query, (run_ids,))).fetchall()
        return [float(row[0]) for row in rows]

    async def run_ids(self) -> set[str]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url) as conn:
            rows = await (await conn.execute("SELECT id FROM runs")).fetchall()
        return {str(row[0]) for row in rows}

    def holder(self, run_id: str) -> int:
        import psycopg

        with psycopg.connect(self.url) as conn:
            found = conn.execute("SELECT lease_owner FROM runs WHERE id = %s", (run_id,)).fetchone()
        return int(found[0].split(":")[1]) if found and found[0] else 0

    def backends(self) -> list[int]:
        """The PostgreSQL server processes connected to this deployment's database."""
        import psycopg

        if self.sqlite:
            return []
        with psycopg.connect(self.admin, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,)
            ).fetchall()
        return [int(row[0]) for row in rows]

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the API process, the workers and the database's server
        processes (``/proc``: user + system; a server process that exited is not counted)."""
        api = [p.pid for p in self.processes if p.pid not in self.workers][:1]
        return {
            "api": sum(_cpu_s(pid) for pid in api),
            "workers": sum(_cpu_s(pid) for pid in self.workers),
            "postgres": sum(_cpu_s(pid) for pid in self.backends()),
        }


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@dataclass
class Layout:
    label: str
    rate: float  # runs/s
    claims: list[float]  # ms, under ``--concurrency`` clients
    single: list[float]  # ms, one client at a time
    cpu: dict[str, float]  # CPU ms per run by process kind

    @property
    def cpu_ms(self) -> float:
        return sum(self.cpu.values())


async def throughput(
    admin: str,
    teams: Path,
    root: Path,
    workers: int | None,
    args: argparse.Namespace,
    label: str,
    sqlite: bool = False,
) -> Layout:
    """Runs/s, claim latencies (ms; under load and at one client) and CPU ms per run by
    process kind."""
    with Deployment(admin, teams, root, sqlite=sqlite) as deployment:
        deployment.serve(workers)
        await deployment.ready()
        limits = httpx.Limits(max_connections=args.concurrency * 2 + 10)
        async with httpx.AsyncClient(base_url=deployment.api, limits=limits, timeout=120) as http:
            api = await Api.login(http)
            before = deployment.cpu()
            rate = await server_throughput(api, args.runs, args.concurrency)
            after = deployment.cpu()
            claims: list[float] = []
            single: list[float] = []
            if workers is not None:
                claims = await deployment.claim_latencies()
                singles = []
                for _ in range(args.single):  # one client: nothing queued behind other runs
                    run_id = await api.start(await api.session())
                    await api.follow(run_id)
                    singles.append(run_id)
                single = await deployment.claim_latencies(singles)
    used = {kind: (after[kind] - before.get(kind, 0.0)) * 1000 / args.runs for kind in after}
    return Layout(label, rate, claims, single, used)


async def takeover(admin: str, teams: Path, root: Path, times: int) -> list[float]:
    """Seconds from ``kill -9`` of a run's worker to the ``resumed`` event of its successor."""
    seconds: list[float] = []
    with Deployment(admin, teams, root) as deployment:
        deployment.serve(2)
        await deployment.ready()
        async with httpx.AsyncClient(base_url=deployment.api, timeout=300) as http:
            api = await Api.login(http)
            for _ in range(times):
                session = await api.session("slow")
                started = await http.post(
                    f"/api/v1/sessions/{session}/runs",
                    json={"input": "Compare PostgreSQL and MongoDB on performance and cost"},
                    headers=api.headers,
                )
                run_id = started.json()["run_id"]
                seconds.append(await _kill_and_time(deployment, api, run_id))
                deployment.worker()  # two workers again
                await deployment.ready()
    return seconds


async def _kill_and_time(deployment: Deployment, api: Api, run_id: str) -> float:
    killed_at, took = 0.0, 0.0
    url = f"/api/v1/runs/{run_id}/events"
    async with api.http.stream("GET", url, headers=api.headers) as response:
        async for line in response.aiter_lines():
            if not line.startswith("event:"):
                continue
            kind = line.removeprefix("event:").strip()
            if kind == "step_completed" and not killed_at:
                pid = deployment.holder(run_id)
                os.kill(pid, signal.SIGKILL)
                deployment.workers.pop(pid).wait()
                killed_at = time.monotonic()
            elif kind == "resumed" and killed_at and not took:
                took = time.monotonic() - killed_at
            elif kind == "run_completed":
                break
    if not took:
        raise BenchmarkError(f"run {run_id} was not taken over")
    return took


def _ms(values: list[float]) -> str:
    if not values:
        return "—"
    return f"p50 {percentile(values, 50):.1f} ms, p99 {percentile(values, 99):.1f} ms"


async def benchmark(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="teamgraph-scale-") as tmp:
        root = Path(tmp)
        teams = write_team(root)
        (teams / "slow.yaml").write_text(SLOW)
        done: dict[str, Layout] = {}
        for label, workers, sqlite in (
            ("in-process sqlite", None, True),
            ("in-process pg", None, False),
            ("1 API + 1 worker", 1, False),
            ("1 API + 2 workers", 2, False),
        )[: 3 if args.no_second_worker else 4]:
            if args.only and label not in args.only:
                continue
            layout = await throughput(
                args.admin_url, teams, root, workers, args, label, sqlite=sqlite
            )
            done[label] = layout
            ratios = [
                f"  ×{layout.rate / done[other].rate:.2f} {short}"
                for other, short in (
                    ("in-process pg", "in-process pg"),
                    ("1 API + 1 worker", "one worker"),
                )
                if other in done and workers is not None
            ]
            print(f"{label:<18} runs_per_s {layout.rate:6.1f}" + "".join(ratios), flush=True)
            split = ", ".join(f"{kind} {ms:.1f}" for kind, ms in layout.cpu.items() if ms)
            print(
                f"{'':<18} cpu_ms_per_run {layout.cpu_ms:6.1f}  ({split})"
                f"  runs_per_cpu_s {1000 / layout.cpu_ms:5.1f}",
                flush=True,
            )
            if workers is not None:
                print(
                    f"{'':<18} claim under {args.concurrency} clients {_ms(layout.claims)};"
                    f" one client {_ms(layout.single)}",
                    flush=True,
                )
        if len(done) < 3:
            return 0
        sqlite_ip, pg_ip = done["in-process sqlite"], done["in-process pg"]
        dist = done["1 API + 1 worker"]
        print(
            f"distributed/in-process ratio R {dist.cpu_ms / sqlite_ip.cpu_ms:.2f}"
            f"  (CPU per run, 1 API + 1 worker on PostgreSQL / in-process on SQLite;"
            f" / in-process on PostgreSQL {dist.cpu_ms / pg_ip.cpu_ms:.2f}; target ≤ 3)",
            flush=True,
        )
        print(
            f"postgres/sqlite runs/s ratio P {pg_ip.rate / sqlite_ip.rate:.2f}"
            f"  (in-process; target ≥ 0.7)",
            flush=True,
        )
        print(
            f"runs per CPU-second distributed/in-process pg"
            f" {pg_ip.cpu_ms / dist.cpu_ms:.2f} (target ≥ 0.8)",
            flush=True,
        )
        if args.throughput_only:
            return 0
        took = await takeover(args.admin_url, teams, root, args.takeovers)
        print(
            "takeover after kill -9 (default lease 10 s, stalled after 10 s): "
            + ", ".join(f"{s:.1f} s" for s in took),
            flush=True,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--takeovers", type=int, default=3)
    parser.add_argument(
        "--only", action="append", default=[], help="Only this layout (repeatable; no ratios)."
    )
    parser.add_argument(
        "--no-second-worker", action="store_true", help="Skip the 1 API + 2 workers layout."
    )
    parser.add_argument(
        "--single", type=int, default=30, help="Runs by one client for the claim latency."
    )
    parser.add_argument("--admin-url", default=ADMIN, help="A PostgreSQL database to create from.")
    parser.add_argument("--quick", action="store_true", help="A smoke run: few runs, one kill.")
    parser.add_argument(
        "--throughput-only", action="store_true", help="No takeover: the layouts' figures only."
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.concurrency, args.takeovers, args.single = 40, 8, 1, 10
    try:
        return asyncio.run(benchmark(args))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
