"""Side by side with the LangGraph Agent Server: teamgraph's server and ``langgraph dev``
(langgraph-cli[inmem], the in-memory runtime) on the same machine, same graph shape, same client.

The peer is installed from the package registry into its own virtual environment under
``build/peer`` (versions pinned in ``PEER_PACKAGES``; made once, reused). It serves
``benchmarks/peer/graph.py``: the benchmark team's shape (``a`` → ``b``, ``c`` → ``d``) whose steps
do the CPU work of one offline-model call each — calibrated here, in this process, by timing the
offline model's calls during teamgraph's own warm-up runs — and return the texts the offline model
wrote for those steps. Three columns:

* ``teamgraph``: ``benchmarks/server.py``'s server as ``teamgraph serve`` runs it (SQLite,
  JWT auth, every event with token frames, at most 4 runs executing);
* ``peer as shipped``: ``langgraph dev`` with its defaults (no auth, 10 jobs), the client asking
  for the default stream mode (``values``), steps making no model call;
* ``peer + tokens, auth, 4 jobs``: the steps stream their text through a chat model,
  ``stream_mode: [updates, messages-tuple]``, a custom JWT auth with owner-scoped threads
  (``benchmarks/peer/auth.py``), ``--n-jobs-per-worker 4``.

Each run is on a thread (session) of its own, made beforehand. The client writes and reads HTTP
by hand (``server.RawClient``) for both servers: teamgraph's runs are ``POST …/runs`` then
``GET …/events``; the peer's ``POST /threads/{id}/runs/stream``. Printed per column, and as
ratios teamgraph / peer:

* ``runs/s``: ``--runs`` runs by 20 clients, each read to the end of its stream — the median of
  ``--rate-rounds`` rounds taken in turn on the three servers, all started beforehand (the
  machine's speed drifts by tens of percent within minutes: measured one after the other, the
  columns would compare two different machines);
* ``server CPU/run``: the server process's CPU (``/proc``) over those runs, per run (median);
* ``bytes/run``: SSE bytes the client read per run;
* ``TTFE p50/p99 burst``: ``--clients`` (50) clients at once, start request sent → first
  ``data:`` line, ``--rounds`` rounds;
* ``TTFE p50/p99 beside``: one client, one run at a time, while ``--clients`` streams follow runs
  of a slow graph (30 s a step) — on a server started with room for all of them to execute
  (``--clients`` + 20 jobs), so the figure is what open streams cost, not a queue's wait;
* ``first step``: one client alone, start request → the first step's result on the stream, p50;
* ``RSS``: the server's resident memory after the rounds of runs;
* ``in-process runs/s``: no HTTP — teamgraph's ``Runner`` on SQLite (durable) and the peer's graph
  with LangGraph's in-memory checkpointer, 20 at once.

Run ``python benchmarks/peer_server.py`` (≈ 4 minutes; the first run also installs the peer) or
``--quick`` (smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server import (  # the benchmark next to this one
    REQUEST,
    TEMPLATE,
    Api,
    BenchmarkError,
    RawClient,
    Server,
    free_port,
    inprocess_throughput,
    percentile,
    server_settings,
    stop_process,
    wait_healthy,
    write_team,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEER = REPO / "build" / "peer"
PEER_PACKAGES = (
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph==1.2.24",
    "langchain-core==1.8.3",
    "pyjwt==2.15.1",
)
CONCURRENCY = 20
SLOW_TEAM = """\
name: bench_slow
description: The benchmark workflow with a model that takes 30 s a call.
pattern: workflow
model: offline
model_kwargs: {{latency: 30.0}}
members:
  - name: worker
    description: Does one benchmark step.
workflow:
  max_parallel: 4
  synthesizer: concat
  templates_dirs: [{templates}]
"""


# --------------------------------------------------------------------------------------------
# the peer's environment and the calibration


def peer_python() -> Path:
    """The peer's interpreter in ``build/peer/venv``, installed when missing or outdated."""
    venv, marker = PEER / "venv", PEER / "venv" / ".packages"
    python = venv / "bin" / "python"
    wanted = "\n".join(PEER_PACKAGES)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    uv = REPO / ".tools" / "bin" / "uv"
    shutil.rmtree(venv, ignore_errors=True)
    print(f"installing the peer into {venv} …", flush=True)
    base = getattr(sys, "_base_executable", sys.executable)
    if uv.exists():
        _check([str(uv), "venv", "-q", "--python", base, str(venv)])
        _check([str(uv), "pip", "install", "-q", "--python", str(python), *PEER_PACKAGES])
    else:
        _check([base, "-m", "venv", str(venv)])
        _check([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES])
    marker.write_text(wanted)
    return python


def _check(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise BenchmarkError(f"{' '.join(command[:3])} … failed:\n{done.stderr[-2000:]}")


@dataclass
class Calibration:
    model_ms: float  # CPU of one offline-model call (mean over the bench team's steps)
    iterations: int  # of ``work`` that cost as much
    replies: dict[str, str]  # the offline model's text per step


async def calibrate(root: Path, teams: Path) -> Calibration:
    """Time the offline model's calls (thread CPU inside ``respond``) over teamgraph's own runs
    of the bench team, keep one run's replies, and size ``work`` to the same CPU."""
    from peer.graph import work
    from teamgraph.llm import offline
    from teamgraph.runtime.team_api import Team

    spent: list[float] = []
    texts: list[str] = []
    respond = offline.respond

    def timed(*args: Any, **kwargs: Any) -> Any:
        begin = time.thread_time()
        reply = respond(*args, **kwargs)
        spent.append(time.thread_time() - begin)
        texts.append(reply.text)
        return reply

    settings = server_settings(root, teams, f"sqlite:///{root}/calibrate.db")
    team = Team.from_yaml(teams / "bench.yaml", settings=settings)
    offline.respond = timed  # type: ignore[assignment]
    try:
        async with team.runner() as runner:
            for _ in range(30):
                await runner.run(REQUEST, template=TEMPLATE, thread_id=uuid.uuid4().hex)
    finally:
        offline.respond = respond  # type: ignore[assignment]
    model_ms = statistics.median(spent) * 1000
    begin = time.thread_time()
    work(200_000)
    per_ms = 200_000 / ((time.thread_time() - begin) * 1000)
    return Calibration(
        model_ms, round(model_ms * per_ms), dict(zip("abcd", texts[:4], strict=True))
    )


# --------------------------------------------------------------------------------------------
# the two servers behind one interface


class Target:
    """A server under test: how to start it, make a client, and run once on a connection."""

    name = ""
    url = ""
    pid = 0

    async def start(self, jobs: int | None = None) -> None:
        """Start the server; ``jobs``: how many runs may execute at once (default: its own)."""
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def thread(self, slow: bool = False) -> Thread:
        raise NotImplementedError

    async def open(self, http: RawClient, thread: Thread) -> None:
        """Send what starts a run on ``thread`` and opens its event stream."""
        raise NotImplementedError

    def first_step(self, text: str) -> bool:
        raise NotImplementedError

    def failed(self, stream: str) -> bool:
        """Whether a whole run's stream says the run failed."""
        return "event: error" in stream

    async def first_event(self, thread: Thread) -> float:
        """Milliseconds from starting a run on ``thread`` (on a new connection) to the first
        ``data:`` line of its stream; the connection is then closed (the run goes on)."""
        http = await RawClient.connect(self.url)
        try:
            sent = time.perf_counter()
            await self.open(http, thread)
            status, _ = await http.head()
            if status != 200:
                raise BenchmarkError(f"{self.name}: stream → {status}")
            text = ""
            async for chunk in http.chunks():
                text += chunk.decode()
                if "data:" in text:
                    return (time.perf_counter() - sent) * 1000
            raise BenchmarkError(f"{self.name}: a stream ended before its first event")
        finally:
            http.close()

    async def run(self, http: RawClient, thread: Thread, seen: Callable[[str], None]) -> int:
        """One run on ``thread`` over ``http``, read to its end; ``seen`` gets ``"first"`` at
        the first ``data:`` line and ``"step"`` at the first step's result. Returns the stream's
        bytes."""
        await self.open(http, thread)
        status, headers = await http.head()
        if status != 200 or headers.get("transfer-encoding") != "chunked":
            raise BenchmarkError(f"{self.name}: stream → {status} {headers}")
        seen("open")
        text, first, step = "", True, True
        async for chunk in http.chunks():
            text += chunk.decode()
            if first and "data:" in text:
                seen("first")
                first = False
            if step and self.first_step(text):
                seen("step")
                step = False
        if self.failed(text):
            raise BenchmarkError(f"{self.name}: a run failed: {text[-500:]}")
        return len(text.encode())


@dataclass
class Thread:
    headers: dict[str, str]
    id: str
    slow: bool = False


class Teamgraph(Target):
    name = "teamgraph"

    def __init__(self, root: Path, teams: Path) -> None:
        self.root, self.teams = root, teams
        self.api: Api | None = None
        self.http: httpx.AsyncClient | None = None

    async def start(self, jobs: int | None = None) -> None:
        home = Path(tempfile.mkdtemp(prefix="teamgraph-", dir=self.root))  # a fresh database
        settings = server_settings(home, self.teams, None)
        if jobs:
            settings = settings.model_copy(update={"max_concurrent_runs": jobs})
        self.server = Server(settings, home)
        self.url, self.pid = self.server.url, self.server.process.pid
        await self.server.wait_ready()
        self.http = httpx.AsyncClient(base_url=self.url, timeout=60)
        self.api = await Api.login(self.http)

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        self.server.stop()

    async def thread(self, slow: bool = False) -> Thread:
        assert self.api is not None
        session = await self.api.session("bench_slow" if slow else "bench")
        return Thread(self.api.headers, session, slow)

    def first_step(self, text: str) -> bool:
        return "event: step_completed" in text

    def failed(self, stream: str) -> bool:
        return "event: run_completed" not in stream

    async def open(self, http: RawClient, thread: Thread) -> None:
        body = {"input": REQUEST, "template": TEMPLATE}
        headers = {**thread.headers, "Content-Type": "application/json"}
        http.send("POST", f"/api/v1/sessions/{thread.id}/runs", headers, json.dumps(body).encode())
        status, answer = await http.response()
        if status not in (200, 201, 202):
            raise BenchmarkError(f"teamgraph: start → {status}: {answer[:300]!r}")
        events = f"/api/v1/runs/{json.loads(answer)['run_id']}/events"
        http.send("GET", events, {**thread.headers, "Accept": "text/event-stream"})


def _spawn(
    command: list[str], cwd: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


class Peer(Target):
    def __init__(self, root: Path, calibration: Calibration, *, tokens: bool) -> None:
        self.root, self.calibration, self.tokens = root, calibration, tokens
        self.name = "peer + tokens, auth, 4 jobs" if tokens else "peer as shipped"
        self.secret = uuid.uuid4().hex * 2

    async def start(self, jobs: int | None = None) -> None:
        project = self.root / ("peer-tokens" if self.tokens else "peer-shipped")
        shutil.copytree(
            HERE / "peer", project, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
        )
        spec: dict[str, Any] = {
            "dependencies": ["."],
            "graphs": {"bench": "./graph.py:graph", "bench_slow": "./graph.py:slow"},
        }
        if self.tokens:
            spec["auth"] = {"path": "./auth.py:auth"}
        (project / "langgraph.json").write_text(json.dumps(spec))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [str(peer_python().parent / "langgraph"), "dev", "--no-browser", "--no-reload"]
        command += ["--port", str(port), "--server-log-level", "warning"]
        if jobs or self.tokens:
            command += ["--n-jobs-per-worker", str(jobs or 4)]
        config = {
            "iterations": self.calibration.iterations,
            "replies": self.calibration.replies,
            "model": self.tokens,
            "slow_s": 30.0,
        }
        env = {
            **os.environ,
            "PEER_BENCH": json.dumps(config),
            "PEER_JWT_SECRET": self.secret,
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LOG_LEVEL": "WARNING",
        }
        self.log = project / "server.log"
        self.process = _spawn(command, project, env, self.log)
        self.pid = self.process.pid
        await wait_healthy(self.process, f"{self.url}/ok", self.log, 120)

    async def stop(self) -> None:
        stop_process(self.process)

    async def thread(self, slow: bool = False) -> Thread:
        headers = {"Content-Type": "application/json"}
        if self.tokens:
            token = jwt.encode({"sub": uuid.uuid4().hex}, self.secret, algorithm="HS256")
            headers["Authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(base_url=self.url) as http:
            made = await http.post("/threads", json={}, headers=headers)
        if made.status_code != 200:
            raise BenchmarkError(f"peer: POST /threads → {made.status_code}: {made.text[:300]}")
        return Thread(headers, made.json()["thread_id"], slow)

    async def open(self, http: RawClient, thread: Thread) -> None:
        body: dict[str, Any] = {
            "assistant_id": "bench_slow" if thread.slow else "bench",
            "input": {"request": REQUEST},
        }
        if self.tokens:
            body["stream_mode"] = ["updates", "messages-tuple"]
        payload = json.dumps(body).encode()
        http.send("POST", f"/threads/{thread.id}/runs/stream", thread.headers, payload)

    def first_step(self, text: str) -> bool:
        if self.tokens:
            return "event: updates" in text
        return text.count("event: values") >= 2  # the input, then the state after ``a``


# --------------------------------------------------------------------------------------------
# measurements


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(current := todo.pop())
        todo += parents.get(current, [])
    return found


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, with reaped children) of ``pid`` and its descendants."""
    total = 0
    for each in _tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, MiB."""
    total = 0
    for each in _tree(pid):
        try:
            status = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        total += next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
        )
    return total / 1024


def _noop(_what: str) -> None:
    return None


async def throughput(target: Target, runs: int) -> tuple[float, float, float]:
    """runs/s, server CPU ms per run and stream bytes per run over ``runs`` runs by
    ``CONCURRENCY`` clients (a thread each run, made beforehand; a connection each run)."""
    threads = [await target.thread() for _ in range(runs)]
    todo, sizes = iter(threads), []

    async def client() -> None:
        for thread in todo:
            http = await RawClient.connect(target.url)
            try:
                sizes.append(await target.run(http, thread, _noop))
            finally:
                http.close()

    cpu, wall = cpu_s(target.pid), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CONCURRENCY)))
    wall, cpu = time.perf_counter() - wall, cpu_s(target.pid) - cpu
    return runs / wall, cpu / runs * 1000, statistics.mean(sizes)


async def alone(target: Target, runs: int) -> tuple[list[float], list[float]]:
    """One client, one run at a time: ms to the first event and to the first step's result."""
    firsts: list[float] = []
    steps: list[float] = []
    for _ in range(runs):
        thread = await target.thread()
        http = await RawClient.connect(target.url)
        sent = time.perf_counter()

        def seen(what: str, sent: float = sent) -> None:
            if what in ("first", "step"):
                (firsts if what == "first" else steps).append((time.perf_counter() - sent) * 1000)

        try:
            await target.run(http, thread, seen)
        finally:
            http.close()
    return firsts, steps


async def burst(target: Target, clients: int, rounds: int) -> list[float]:
    """``clients`` clients at once (connections and threads made beforehand), each starting a
    run and reading its stream to the end: ms from the start request to the first event."""
    results: list[float] = []
    for _ in range(rounds):
        threads = [await target.thread() for _ in range(clients)]
        connections = [await RawClient.connect(target.url) for _ in range(clients)]
        barrier = asyncio.Event()

        async def client(http: RawClient, thread: Thread, barrier: asyncio.Event = barrier) -> None:
            await barrier.wait()
            sent = time.perf_counter()

            def seen(what: str) -> None:
                if what == "first":
                    results.append((time.perf_counter() - sent) * 1000)

            try:
                await target.run(http, thread, seen)
            finally:
                http.close()

        tasks = [
            asyncio.create_task(client(c, t)) for c, t in zip(connections, threads, strict=True)
        ]
        await asyncio.sleep(0.05)
        barrier.set()
        await asyncio.gather(*tasks)
    return results


async def beside(target: Target, streams: int, runs: int) -> list[float]:
    """``streams`` streams held open on runs of the slow graph (30 s a step, every one of them
    executing: the server was started with room for them); meanwhile one client starts ``runs``
    runs one at a time: ms to each one's first event."""
    threads = [await target.thread(slow=True) for _ in range(streams)]
    opened: list[str] = []
    all_open = asyncio.Event()

    async def hold(thread: Thread) -> None:
        def seen(what: str) -> None:
            if what == "open":
                opened.append(thread.id)
                if len(opened) == streams:
                    all_open.set()

        http = await RawClient.connect(target.url)
        try:
            await target.run(http, thread, seen)
        finally:
            http.close()

    holders = [asyncio.create_task(hold(thread)) for thread in threads]
    try:
        try:
            await asyncio.wait_for(all_open.wait(), 60)
        except TimeoutError:
            raise BenchmarkError(
                f"{target.name}: {len(opened)} of {streams} streams opened"
            ) from None
        await asyncio.sleep(1.0)  # the runs under way
        timings = [await target.first_event(await target.thread()) for _ in range(runs)]
    finally:
        for holder in holders:
            holder.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
    return timings


async def turns(targets: list[Target], args: argparse.Namespace) -> list[dict[str, float]]:
    """runs/s, CPU and bytes per run of each target: the medians of ``--rate-rounds`` rounds of
    ``--runs`` runs, the targets taking turns (all started first), and the RSS after them."""
    rounds: list[list[tuple[float, float, float]]] = [[] for _ in targets]
    try:
        for target in targets:
            print(f"{target.name}: starting", flush=True)
            await target.start()
            await throughput(target, CONCURRENCY)  # warm-up
        for _ in range(args.rate_rounds):
            for target, taken in zip(targets, rounds, strict=True):
                taken.append(await throughput(target, args.runs))
        columns = []
        for target, taken in zip(targets, rounds, strict=True):
            rate, cpu, size = (statistics.median(values) for values in zip(*taken, strict=True))
            figures = {"runs/s": rate, "server CPU ms/run": cpu, "KiB/run": size / 1024}
            figures["RSS after the runs (MiB)"] = rss_mib(target.pid)
            print(f"{target.name}: runs/s by round {[round(r, 1) for r, _, _ in taken]}")
            columns.append(figures)
        return columns
    finally:
        for target in targets:
            if target.pid:
                await target.stop()


async def measure(target: Target, args: argparse.Namespace) -> dict[str, float]:
    """The latency figures of one column. The open streams are measured on a server of their
    own (its slow runs would otherwise go on through the other measures, and its heap would
    already hold what the bursts left)."""
    figures: dict[str, float] = {}
    await target.start()
    try:
        await throughput(target, CONCURRENCY)  # warm-up
        firsts, steps = await alone(target, args.alone)
        figures["first event p50, alone (ms)"] = percentile(firsts, 50)
        figures["first step p50, alone (ms)"] = percentile(steps, 50)
        ttfe = await burst(target, args.clients, args.rounds)
        figures["TTFE p50, burst (ms)"] = percentile(ttfe, 50)
        figures["TTFE p99, burst (ms)"] = percentile(ttfe, 99)
    finally:
        await target.stop()
    await target.start(jobs=args.clients + CONCURRENCY)
    try:
        await throughput(target, CONCURRENCY)  # warm-up
        timings = await beside(target, args.clients, args.alone)
        figures["TTFE p50, beside open streams (ms)"] = percentile(timings, 50)
        figures["TTFE p99, beside open streams (ms)"] = percentile(timings, 99)
    finally:
        await target.stop()
    print(f"{target.name}: {json.dumps({k: round(v, 2) for k, v in figures.items()})}")
    return figures


async def inprocess(root: Path, teams: Path, calibration: Calibration, runs: int) -> list[float]:
    """In-process runs/s: teamgraph (SQLite), then the peer's graph without and with the model."""
    rates = [await inprocess_throughput(root, teams, runs, CONCURRENCY, None)]
    for model in (False, True):
        rates.append(_peer_inprocess(calibration, runs, model=model))
    return rates


def _peer_inprocess(calibration: Calibration, runs: int, *, model: bool) -> float:
    config = {"iterations": calibration.iterations, "replies": calibration.replies, "model": model}
    done = subprocess.run(
        [str(peer_python()), "inprocess.py", str(runs), str(CONCURRENCY)],
        cwd=HERE / "peer",
        env={**os.environ, "PEER_BENCH": json.dumps(config)},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise BenchmarkError(f"the peer's in-process run failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[0])


def report(columns: list[tuple[str, dict[str, float]]]) -> None:
    names = [name for name, _ in columns]
    print(
        "\n| measure | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"÷ {n}" for n in names[1:])
        + " |"
    )
    print("|---" * (2 * len(names)) + "|")
    ours = columns[0][1]
    for measure in ours:
        values = [figures[measure] for _, figures in columns]
        ratios = [ours[measure] / value if value else float("nan") for value in values[1:]]
        print(
            f"| {measure} | "
            + " | ".join(f"{value:,.1f}" for value in values)
            + " | "
            + " | ".join(f"{ratio:.2f}" for ratio in ratios)
            + " |"
        )


async def benchmark(args: argparse.Namespace) -> int:
    peer_python()
    with tempfile.TemporaryDirectory(prefix="teamgraph-peer-") as tmp:
        root = Path(tmp)
        teams = write_team(root)
        (teams / "bench_slow.yaml").write_text(SLOW_TEAM.format(templates=root / "templates"))
        calibration = await calibrate(root, teams)
        print(
            f"offline model: {calibration.model_ms:.3f} ms CPU a call → "
            f"{calibration.iterations} iterations of work a step"
        )
        targets: list[Target] = [
            Teamgraph(root, teams),
            Peer(root, calibration, tokens=False),
            Peer(root, calibration, tokens=True),
        ]
        rounds = await turns(targets, args)
        columns = [(t.name, figures) for t, figures in zip(targets, rounds, strict=True)]
        for target, (_, figures) in zip(targets, columns, strict=True):
            figures.update(await measure(target, args))
        rates = await inprocess(root, teams, calibration, args.runs)
        for (_, figures), rate in zip(columns, rates, strict=True):
            figures["in-process runs/s"] = rate
        report(columns)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs a round (default 300)")
    parser.add_argument(
        "--rate-rounds", type=int, default=5, help="rounds for runs/s, in turn (default 5)"
    )
    parser.add_argument("--clients", type=int, default=50, help="burst clients (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="burst rounds (default 3)")
    parser.add_argument("--alone", type=int, default=15, help="runs one at a time (default 15)")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rate_rounds, args.clients, args.rounds, args.alone = 40, 1, 10, 1, 3
    try:
        return asyncio.run(benchmark(args))
    except BenchmarkError as exc:
        print(f"peer benchmark failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
