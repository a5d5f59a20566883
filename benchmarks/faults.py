"""Database faults under load: 2 API processes (``serve --workers 0``) and 2 ``teamgraph worker``
processes talk to PostgreSQL through a TCP proxy that breaks their connections
(``tests/faultproxy.py``), while clients start runs and follow their streams.

    .venv/bin/python benchmarks/faults.py [--faults 100] [--clients 8] [--restarts 0] [--seed 7]

Faults, drawn at random one after another (a quiet gap of 1-3 s between two):

* ``reset``   — every connection cut (RST), new ones refused for 0.2-2 s (a restart, as the
  processes see it);
* ``stall``   — nothing passes either way for 1-6 s, connections stay open (a frozen server);
* ``kill``    — ``pg_terminate_backend`` of every connection of the database (an operator);
* ``restart`` — ``pg_ctlcluster 15 main restart`` of the real server (``--restarts N`` of them;
  it stops every database on the server, so it is off by default).

Baseline, in the same run: the same clients with no fault for ``--baseline-s`` seconds.

Printed: runs started, completed and lost (not completed); finished steps run again (a
``step_completed`` twice for one step); runs whose usage differs from the fault-free reference
run (a model call made twice); events missed (stored, never streamed to the client); streams
that closed cleanly before their run's terminal event, outside faults (the empty-stream race,
issue 30: the baseline over ``--baseline-s`` long enough for 2,000 runs checks it); HTTP 5xx
other than 503 during a fault, and any 5xx outside one; the recovery time after each fault —
from the database being reachable again until every run that was in flight at the fault has
stored a new event or ended — p50/p99, by kind of fault; and run latency p50 with faults /
without (the ratio).
Targets (issue 30): lost 0, re-run 0, 5xx outside outages 0, recovery p99 ≤ 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster import (  # noqa: E402
    PASSWORD,
    REQUEST,
    Client,
    Cluster,
    drop_database,
    make_database,
)
from tests.faultproxy import ProxyThread  # noqa: E402

QUICK = """\
name: slow
description: A workflow whose model takes a moment a call.
pattern: workflow
model: offline
model_kwargs: {{latency: {latency}}}
members: [researcher, writer]
"""
TERMINAL = ("run_completed", "run_failed", "run_cancelled")


@dataclass
class Tally:
    started: int = 0
    completed: int = 0
    lost: list[str] = field(default_factory=list)
    steps_rerun: int = 0
    usage_differs: int = 0
    missed_events: int = 0
    early_ends: int = 0  # streams that closed (200, no error) before the run's terminal event
    errors_in_fault: Counter[int] = field(default_factory=Counter)
    errors_outside: Counter[int] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    by_kind: dict[str, list[float]] = field(default_factory=dict)  # recoveries by fault


class Bench:
    def __init__(self, cluster: Cluster, proxy: ProxyThread, direct_url: str) -> None:
        self.cluster, self.proxy, self.direct_url = cluster, proxy, direct_url
        self.in_fault = False
        self.reference: dict[str, Any] | None = None
        self.users: dict[int, Client] = {}
        self.kinds = ["reset", "stall", "kill"]

    # --- clients ----------------------------------------------------------------------------
    async def client(
        self, http: httpx.AsyncClient, index: int, going: Callable[[], bool], tally: Tally
    ) -> None:
        """Runs one after another while ``going()``: started on one API process, followed on
        the other (the last one to its end)."""
        if index not in self.users:
            self.users[index] = await self._user(http)
        user = self.users[index]
        user.http = http
        api = self.cluster.apis[index % len(self.cluster.apis)]
        other = self.cluster.apis[(index + 1) % len(self.cluster.apis)]
        while going():
            began = time.monotonic()
            run_id = await self._start(user, api, tally)
            if run_id is None:
                await asyncio.sleep(0.5)
                continue
            tally.started += 1
            events = await self._follow(user, other, run_id, tally, began + 600)
            stored = await asyncio.to_thread(self._stored, run_id)
            missed = sorted(stored - {e["seq"] for e in events})
            if missed:
                tally.missed_events += len(missed)
                print(f"  run {run_id}: events {missed} stored, never streamed", flush=True)
            self._check(run_id, events, tally)
            tally.latencies.append(time.monotonic() - began)

    async def _user(self, http: httpx.AsyncClient) -> Client:
        api, email = self.cluster.apis[0], f"u{uuid.uuid4().hex[:8]}@example.com"
        while True:
            try:
                body = {"email": email, "password": PASSWORD}
                await http.post(f"{api}/api/v1/auth/register", json=body)
                form = {"username": email, "password": PASSWORD}
                login = await http.post(f"{api}/api/v1/auth/login", data=form)
                if login.status_code == 200:
                    http.cookies.clear()
                    return Client(http, login.json()["access_token"])
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)

    async def _start(self, user: Client, api: str, tally: Tally) -> str | None:
        try:
            made = await user.http.post(
                f"{api}/api/v1/auth/session", json={"team": "slow"}, headers=user.headers
            )
            self._count(made.status_code, tally)
            if made.status_code != 201:
                return None
            user.session = made.json()["session_id"]
            url = f"{api}/api/v1/sessions/{user.session}/runs"
            started = await user.http.post(url, json={"input": REQUEST}, headers=user.headers)
            self._count(started.status_code, tally)
            return str(started.json()["run_id"]) if started.status_code == 202 else None
        except httpx.HTTPError:
            return None  # refused while the API process waited on the database: asked again

    async def _follow(
        self, user: Client, api: str, run_id: str, tally: Tally, deadline: float
    ) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["type"] not in TERMINAL:
            if time.monotonic() > deadline:
                break
            after = seen[-1]["seq"] if seen else 0
            url = f"{api}/api/v1/runs/{run_id}/events?after={after}"
            try:
                async with user.http.stream("GET", url, headers=user.headers) as response:
                    self._count(response.status_code, tally)
                    if response.status_code != 200:
                        await asyncio.sleep(0.3)
                        continue
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            seen.append(_json(line[6:]))
                    ended = bool(seen) and seen[-1]["type"] in TERMINAL
                    if not ended and not self.in_fault:  # closed cleanly, yet not at the end
                        tally.early_ends += 1
            except httpx.HTTPError:
                await asyncio.sleep(0.3)  # the stream broke: reconnect after the last event
        return seen

    def _check(self, run_id: str, events: list[dict[str, Any]], tally: Tally) -> None:
        if not events or events[-1]["type"] != "run_completed":
            tally.lost.append(run_id)
            return
        tally.completed += 1
        done = Counter(e["step_id"] for e in events if e["type"] == "step_completed")
        tally.steps_rerun += sum(n - 1 for n in done.values())
        if self.reference is None:
            self.reference = events[-1]["usage"]
        elif events[-1]["usage"] != self.reference:
            tally.usage_differs += 1

    def _count(self, status: int, tally: Tally) -> None:
        if status >= 500:
            (tally.errors_in_fault if self.in_fault else tally.errors_outside)[status] += 1

    # --- faults -----------------------------------------------------------------------------
    async def inject(self, count: int, restarts: int, rng: random.Random, tally: Tally) -> None:
        kinds = self.kinds
        plan = [rng.choice(kinds) for _ in range(count - restarts)] + ["restart"] * restarts
        rng.shuffle(plan)
        for kind in plan:
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            in_flight = await asyncio.to_thread(self._in_flight)
            self.in_fault = True
            await self._fault(kind, rng)
            back = time.monotonic()
            tally.faults[kind] += 1
            recovery = asyncio.create_task(self._recovered(in_flight, back))
            await asyncio.sleep(0.5)  # requests already answered during the fault still count
            self.in_fault = False
            took, last = await recovery
            moment = time.strftime("%H:%M:%S", time.localtime(time.time() - took))
            print(f"  {moment} {kind}: recovered in {took:.2f} s (last: run {last})", flush=True)
            tally.recoveries.append(took)
            tally.by_kind.setdefault(kind, []).append(took)

    async def _fault(self, kind: str, rng: random.Random) -> None:
        if kind == "reset":
            self.proxy.reset()
            refused = rng.uniform(0.2, 2.0)
            self.proxy.refuse(refused)
            await asyncio.sleep(refused)
        elif kind == "stall":
            stalled = rng.uniform(1.0, 6.0)
            self.proxy.stall(stalled)
            await asyncio.sleep(stalled)
        elif kind == "kill":
            await asyncio.to_thread(self._terminate_backends)
        else:
            command = ["pg_ctlcluster", "15", "main", "restart"]
            await asyncio.to_thread(subprocess.run, command, check=True)

    def _terminate_backends(self) -> None:
        import psycopg

        name = self.direct_url.rsplit("/", 1)[1]
        with psycopg.connect(self.direct_url.rsplit("/", 1)[0] + "/postgres") as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )

    def _stored(self, run_id: str) -> set[int]:
        """The seqs of the run's stored events (a resumed execution's start further on: the
        numbering has gaps by design, so a stream is compared with what was stored)."""
        import psycopg

        while True:  # the benchmark's own reads wait out a real restart too
            try:
                with psycopg.connect(self.direct_url) as conn:
                    query = "SELECT seq FROM events WHERE run_id = %s"
                    rows = conn.execute(query, (run_id,)).fetchall()
                return {int(seq) for (seq,) in rows}
            except psycopg.OperationalError:
                time.sleep(0.2)

    def _in_flight(self) -> dict[str, int]:
        import psycopg

        while True:
            try:
                with psycopg.connect(self.direct_url) as conn:
                    rows = conn.execute(
                        "SELECT id, last_seq FROM runs WHERE status IN ('pending', 'running')"
                    ).fetchall()
                return {str(run_id): int(seq) for run_id, seq in rows}
            except psycopg.OperationalError:
                time.sleep(0.2)

    async def _recovered(self, in_flight: dict[str, int], back: float) -> tuple[float, str]:
        """Seconds from ``back`` until every run of ``in_flight`` stored a new event or ended,
        and the last run to do so."""
        import psycopg

        waiting, last = dict(in_flight), ""
        while waiting:
            try:
                async with await psycopg.AsyncConnection.connect(self.direct_url) as conn:
                    cursor = await conn.execute(
                        "SELECT id, last_seq, status FROM runs WHERE id = ANY(%s)",
                        (list(waiting),),
                    )
                    for run_id, seq, status in await cursor.fetchall():
                        if seq > waiting[run_id] or status not in ("pending", "running"):
                            waiting.pop(run_id)
                            last = run_id
            except psycopg.OperationalError:
                pass  # the real server is still restarting
            if waiting:
                await asyncio.sleep(0.05)
            if time.monotonic() - back > 300:
                print(f"  runs {sorted(waiting)} did not move within 300 s", flush=True)
                break
        return time.monotonic() - back, last


def _json(text: str) -> dict[str, Any]:
    import json

    value: dict[str, Any] = json.loads(text)
    return value


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)  # nearest rank: the smallest value with q of them at or below it
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def _phase(
    bench: Bench, clients: int, seconds: float, faults: int, restarts: int, rng: random.Random
) -> Tally:
    """``clients`` clients for ``seconds`` (no fault), or until ``faults`` faults are over."""
    tally = Tally()
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=120)) as http:
        if not faults:
            until = time.monotonic() + seconds
            going: Callable[[], bool] = lambda: time.monotonic() < until  # noqa: E731
            await asyncio.gather(*(bench.client(http, i, going, tally) for i in range(clients)))
            return tally
        injector = asyncio.create_task(bench.inject(faults, restarts, rng, tally))
        going = lambda: not injector.done()  # noqa: E731
        await asyncio.gather(*(bench.client(http, i, going, tally) for i in range(clients)))
        await injector
    return tally


def _report(name: str, tally: Tally) -> None:
    print(f"{name}:")
    print(
        f"  runs started {tally.started}, completed {tally.completed}, lost {len(tally.lost)}"
        + (f" {tally.lost[:5]}" if tally.lost else "")
    )
    print(
        f"  finished steps run again {tally.steps_rerun}; runs whose usage differs "
        f"{tally.usage_differs}; events missed {tally.missed_events}; streams ended before "
        f"the run's end (outside faults) {tally.early_ends}"
    )
    print(
        f"  5xx during faults {dict(tally.errors_in_fault)}; 5xx outside faults "
        f"{dict(tally.errors_outside)}"
    )
    if tally.latencies:
        print(
            f"  run latency p50 {statistics.median(tally.latencies):.2f} s, "
            f"p99 {_pct(tally.latencies, 0.99):.2f} s"
        )
    if tally.recoveries:
        print(
            f"  faults {dict(tally.faults)}; recovery p50 {_pct(tally.recoveries, 0.5):.2f} s, "
            f"p99 {_pct(tally.recoveries, 0.99):.2f} s, max {max(tally.recoveries):.2f} s"
        )
        for kind, took in sorted(tally.by_kind.items()):
            print(f"    {kind}: recovery p50 {_pct(took, 0.5):.2f} s, max {max(took):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=0, help="real server restarts among them")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--baseline-s", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kinds", default="reset,stall,kill", help="faults drawn from these")
    parser.add_argument("--latency", type=float, default=0.1, help="the model's seconds a call")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    direct = make_database()
    proxy = ProxyThread(("127.0.0.1", 5432))
    folder = Path(tempfile.mkdtemp(prefix="tg-faults-"))
    (folder / "teams").mkdir()
    (folder / "teams" / "slow.yaml").write_text(QUICK.format(latency=args.latency))
    cluster = Cluster(proxy.url(direct.rsplit("/", 1)[1]), folder / "teams", folder)
    cluster.extra = {  # the clients are not what is measured: no rate limit, no span lines
        "TEAMGRAPH_RATE_LIMITS": '{"chat": "100000/minute", "stream": "100000/minute", '
        '"register": "100000/minute", "login": "100000/minute"}',
        "TEAMGRAPH_OTEL_EXPORTER": "",
        "TEAMGRAPH_DB_POOL_SIZE": "4",  # four processes on a shared server's 100 connections
        "TEAMGRAPH_DB_MAX_OVERFLOW": "4",
        "TEAMGRAPH_LEASE_TTL_S": "10",  # the defaults, as deployed
        "TEAMGRAPH_WORKER_STALLED_S": "10",
        "TEAMGRAPH_WORKER_HEARTBEAT_S": "2",
    }
    apis = [cluster.start_api(), cluster.start_api()]
    cluster.start_worker()
    cluster.start_worker()
    try:
        cluster.wait_ready()
        bench = Bench(cluster, proxy, direct)
        bench.kinds = args.kinds.split(",")
        base = asyncio.run(_phase(bench, args.clients, args.baseline_s, 0, 0, rng))
        _report(f"baseline ({args.baseline_s:.0f} s, no fault)", base)
        if not args.faults:
            return
        faulted = asyncio.run(_phase(bench, args.clients, 0, args.faults, args.restarts, rng))
        _report(f"{args.faults} faults", faulted)
        alive = all(p.poll() is None for p in [*apis, *cluster.workers.values()])
        print(f"processes alive at the end (none restarted): {alive}")
        if base.latencies and faulted.latencies:
            ratio = statistics.median(faulted.latencies) / statistics.median(base.latencies)
            print(f"run latency p50 with faults / without: {ratio:.2f}x")
        print(f"logs: {folder}")
    finally:
        cluster.stop()
        for api in apis:
            api.terminate()
            api.wait(timeout=60)
        proxy.close()
        drop_database(direct)


if __name__ == "__main__":
    main()
