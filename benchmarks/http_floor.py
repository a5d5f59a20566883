"""What a run costs teamgraph's server beyond the run itself and beyond FastAPI/uvicorn's floor.

Three figures, CPU per run, each the median of ``--rounds`` rounds of ``--runs`` runs that the
three take in turn (both servers started first: the machine's speed drifts by tens of percent
within minutes, so figures measured one after the other would compare different machines):

* ``through the API``: the 4-step offline team started and streamed through the runs API
  (``POST …/runs`` + ``GET …/events`` read to the end) by 20 clients, server CPU (``/proc``) —
  the ``teamgraph`` column of ``benchmarks/peer_server.py``;
* ``in-process``: the same runs through ``Runner`` (no HTTP, every guarantee kept: checkpoints,
  ledger, journal, stored events), started by 20 tasks and executing as the server executes
  them — at most ``max_concurrent_runs`` (4) at once — CPU of this process per run (with 20
  executing at once a run costs ≈ 0.5 ms less: larger event batches, fewer wake-ups);
* ``floor``: an empty FastAPI app served the way ``teamgraph serve`` serves (uvicorn on uvloop and
  httptools, the start-up heap frozen), with the same pair of requests — ``POST /start`` reads a
  JSON body and answers a run id, ``GET /events/{id}`` streams as many server-sent events, as
  large, as one teamgraph run sends (taken from one run's stream) through sse-starlette's
  ``EventSourceResponse`` — and nothing else.

``HTTP beyond the floor`` = API − in-process − floor, per round (its median is printed): what
teamgraph's own HTTP layer (auth, session and ownership checks, the session's messages, fanning
out and framing the run's events) adds to a run. Target (issue 17): ≤ 1 ms.

Run ``python benchmarks/http_floor.py`` (≈ 1 minute) or ``--quick``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_server import CONCURRENCY, Teamgraph, Thread, _spawn, throughput
from server import (
    REQUEST,
    TEMPLATE,
    BenchmarkError,
    RawClient,
    free_port,
    server_settings,
    stop_process,
    wait_healthy,
    write_team,
)
from server import throughput as throughput_of
from teamgraph.runtime.backend import open_backend
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team import Team

TARGET_MS = 1.0


def floor_app(events: list[tuple[str, str]]) -> FastAPI:
    """The empty app: a start route and an event stream of ``events`` (type, JSON data)."""
    app = FastAPI()

    @app.get("/health")  # for start-up only: not part of what is measured
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/start")
    async def start(request: Request) -> dict[str, str]:
        await request.json()
        return {"run_id": uuid.uuid4().hex}

    @app.get("/events/{run_id}")
    async def stream(run_id: str) -> EventSourceResponse:
        async def sent() -> AsyncIterator[ServerSentEvent]:
            for seq, (kind, data) in enumerate(events, 1):
                yield ServerSentEvent(data=data, event=kind, id=str(seq))

        return EventSourceResponse(sent())

    return app


def serve_floor(events_file: str, port: int) -> None:
    """The floor server's subprocess (``--serve-floor``)."""
    from teamgraph.server.app import serve

    events = [tuple(pair) for pair in json.loads(Path(events_file).read_text())]
    serve(floor_app(events), "127.0.0.1", port, log_level="warning", access_log=False)


class Floor(Teamgraph):
    """The floor server behind the benchmark's target interface."""

    name = "floor"

    def __init__(self, root: Path, events: list[tuple[str, str]]) -> None:
        self.root = root
        self.events_file = root / "events.json"
        self.events_file.write_text(json.dumps(events))

    async def start(self, jobs: int | None = None) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, __file__, "--serve-floor", str(self.events_file), str(port)]
        self.process = _spawn(command, self.root, dict(os.environ), self.root / "floor.log")
        self.pid = self.process.pid
        await wait_healthy(self.process, f"{self.url}/health", self.root / "floor.log", 30)

    def stop(self) -> None:
        stop_process(self.process)

    async def thread(self, slow: bool = False) -> Thread:
        return Thread({}, "floor")

    async def open(self, http: RawClient, thread: Thread) -> None:
        body = json.dumps({"input": "x"}).encode()
        http.send("POST", "/start", {"Content-Type": "application/json"}, body)
        status, answer = await http.response()
        if status != 200:
            raise BenchmarkError(f"floor: start → {status}")
        http.send("GET", f"/events/{json.loads(answer)['run_id']}", {"Accept": "text/event-stream"})

    async def run(self, http: RawClient, thread: Thread, seen: object) -> int:
        await self.open(http, thread)
        await http.head()
        return sum([len(chunk) async for chunk in http.chunks()])


async def one_stream(target: Teamgraph) -> list[tuple[str, str]]:
    """The events (type, data) of one teamgraph run, as its stream sent them."""
    http = await RawClient.connect(target.url)
    try:
        await target.open(http, await target.thread())
        await http.head()
        text = "".join([chunk.decode() async for chunk in http.chunks()])
    finally:
        http.close()
    events, kind = [], ""
    for line in text.splitlines():
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            events.append((kind, line.removeprefix("data:").strip()))
    return events


@asynccontextmanager
async def inprocess(root: Path, teams: Path) -> AsyncIterator[Callable[[int], Awaitable[float]]]:
    """A runner open on a database of its own, executing as many runs at once as the server
    does; yields ``measure(runs)``: CPU ms of this process per run over that many in-process
    runs by 20 tasks (SQLite threads included)."""
    settings = server_settings(root, teams, f"sqlite:///{root}/inprocess.db")
    team = Team.from_yaml(teams / "bench.yaml", settings=settings)
    gc.collect()
    gc.freeze()  # as `teamgraph serve` and the server benchmark do
    async with open_backend(settings) as backend:
        slots = asyncio.Semaphore(settings.max_concurrent_runs)
        runner = Runner(team.spec, backend, team.config, slots=slots)

        async def run_one(_index: int) -> None:
            result = await runner.run(REQUEST, template=TEMPLATE, thread_id=uuid.uuid4().hex)
            if result.status != "completed":
                raise BenchmarkError(f"in-process run ended {result.status}: {result.error}")

        async def measure(runs: int) -> float:
            before = resource.getrusage(resource.RUSAGE_SELF)
            await throughput_of(run_one, runs, CONCURRENCY)
            after = resource.getrusage(resource.RUSAGE_SELF)
            spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            return spent / runs * 1000

        await measure(CONCURRENCY)  # warm-up
        yield measure


async def benchmark(runs: int, rounds: int) -> int:
    with tempfile.TemporaryDirectory(prefix="teamgraph-floor-") as tmp:
        root = Path(tmp)
        teams = write_team(root)
        ours = Teamgraph(root, teams)
        await ours.start()
        floor: Floor | None = None
        try:
            events = await one_stream(ours)
            floor = Floor(root, events)
            await floor.start()
            for server in (ours, floor):
                await throughput(server, CONCURRENCY)  # warm-up
            figures: list[tuple[float, float, float]] = []
            async with inprocess(root, teams) as measure:
                for _ in range(rounds):
                    _, api_ms, _ = await throughput(ours, runs)
                    _, floor_ms, _ = await throughput(floor, runs)
                    figures.append((api_ms, await measure(runs), floor_ms))
        finally:
            ours.stop()
            if floor is not None:
                floor.stop()
    api_ms, inprocess_ms, floor_ms = (statistics.median(f) for f in zip(*figures, strict=True))
    beyond = statistics.median(api - local - empty for api, local, empty in figures)
    print(f"events per run {len(events)}; medians of {rounds} rounds of {runs} runs")
    print(f"through the API      {api_ms:6.2f} ms CPU per run")
    print(f"in-process           {inprocess_ms:6.2f} ms CPU per run")
    print(f"floor (empty routes) {floor_ms:6.2f} ms CPU per start + stream pair")
    print("beyond, by round     " + ", ".join(f"{a - b - c:.2f}" for a, b, c in figures))
    verdict = "met" if beyond <= TARGET_MS else "missed"
    print(f"HTTP beyond the floor {beyond:5.2f} ms per run (target ≤ {TARGET_MS} ms: {verdict})")
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--serve-floor"]:
        serve_floor(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per round (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure (default 5)")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    try:
        runs, rounds = (40, 1) if args.quick else (args.runs, args.rounds)
        return asyncio.run(benchmark(runs, rounds))
    except BenchmarkError as exc:
        print(f"floor benchmark failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
