"""What a run costs teamgraph's server beyond the run itself and beyond FastAPI/uvicorn's floor.

CPU per run, each figure the median of ``--rounds`` rounds of ``--runs`` runs that all take in
turn (every server started first: the machine's speed drifts by tens of percent within minutes,
so figures measured one after the other would compare different machines):

* ``through the API``: the 4-step offline team started and streamed through the runs API
  (``POST …/runs`` + ``GET …/events`` read to the end) by 20 clients, server CPU (``/proc``) —
  the ``teamgraph`` column of ``benchmarks/peer_server.py``;
* ``runs behind empty routes``: an empty FastAPI app executing the same runs in its own process
  through ``Runner`` (every guarantee kept: checkpoints, ledger, journal, stored events; at most
  ``max_concurrent_runs`` at once, as the server executes them) — ``POST /start`` reads a JSON
  body and answers an id, ``GET /events/{id}`` streams the run. ``streamed live``: the stream
  executes the run and sends its events as they come, those ready together in one write, framed
  as the runs API frames them; ``stream after``: the start executes the run, the stream sends a
  recorded run's events once it has ended. Server CPU. This is the runs API without
  teamgraph's HTTP layer;
* ``in-process`` and ``floor``, measured apart: the same runs through ``Runner`` by 20 tasks
  (CPU of this process), and the empty app alone (its stream: as many server-sent events, as
  large, as one teamgraph run sends, one write each, through the server's own response helper
  ``teamgraph.server.sse.streaming_response``).

Every server is uvicorn on uvloop and httptools with the start-up heap frozen, as
``teamgraph serve`` serves. ``HTTP beyond the floor`` = API − runs behind empty routes streamed
live, per round (its median is printed): what teamgraph's own HTTP layer (auth, session and
ownership checks, the session's messages, the run's event log and its subscribers, middleware)
adds to a run. Target (issue 17): ≤ 1 ms.

The other two differences are printed too. ``measured apart`` (API − in-process − floor) also
charges the HTTP layer with what a run and an HTTP exchange cost more together in one process
than apart (caches, the event loop, the garbage collector: 0.1–0.4 ms a run here, with no
teamgraph code in the HTTP part). ``stream after`` sends no event while the run executes.

Run ``python benchmarks/http_floor.py`` (≈ 2 minutes) or ``--quick``.
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
from fastapi.responses import StreamingResponse

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
from teamgraph.config import Settings
from teamgraph.events import Event
from teamgraph.runtime.backend import open_backend
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team_api import Team
from teamgraph.server.sse import frame, streaming_response

TARGET_MS = 1.0


def floor_app(
    events: list[tuple[str, str]],
    runs: Callable[[], AsyncIterator[Event]] | None = None,
    live: bool = True,
) -> FastAPI:
    """The empty app: a start route and an event stream of ``events`` (type, JSON data). With
    ``runs`` (a new run's event stream) each start has a run: streamed ``live`` as it executes
    (an event per server-sent event), or executed by the start and ``events`` streamed once it
    has ended."""
    app = FastAPI()
    started: dict[str, asyncio.Task[None]] = {}

    @app.get("/health")  # for start-up only: not part of what is measured
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/start")
    async def start(request: Request) -> dict[str, str]:
        await request.json()
        run_id = uuid.uuid4().hex
        if runs is not None and not live:
            started[run_id] = asyncio.create_task(_drain(runs()))
        return {"run_id": run_id}

    @app.get("/events/{run_id}")
    async def stream(run_id: str) -> StreamingResponse:
        if run_id in started:
            await started.pop(run_id)

        async def sent() -> AsyncIterator[str]:
            for seq, (kind, data) in enumerate(events, 1):
                yield frame(kind, data, seq)

        live_run = runs is not None and live
        return streaming_response(_batched(runs()) if live_run and runs else sent())

    return app


async def _batched(run: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """A run's events as it executes, the ones ready together in one write, framed as the runs
    API frames them (what the runs API's stream does, without its event log and subscribers)."""
    ready: asyncio.Queue[Event | None] = asyncio.Queue()

    async def execute() -> None:
        try:
            async for event in run:
                ready.put_nowait(event)
        finally:
            ready.put_nowait(None)

    task = asyncio.create_task(execute())
    try:
        ended = False
        while not ended:
            batch = [await ready.get()]
            while not ready.empty():
                batch.append(ready.get_nowait())
            ended = batch[-1] is None
            if events := [e for e in batch if e is not None]:
                yield "".join([frame(e.type, e.encoded, e.seq) for e in events]).encode()
    finally:
        await task


async def _drain(events: AsyncIterator[Event]) -> None:
    async for _ in events:
        pass


def serve_floor(events_file: str, port: int, settings_json: str | None, live: bool) -> None:
    """The floor server's subprocess (``--serve-floor``); with settings, it executes the runs."""
    from teamgraph.server.app import serve

    events = [(kind, data) for kind, data in json.loads(Path(events_file).read_text())]
    if settings_json is None:
        serve(floor_app(events), "127.0.0.1", port, log_level="warning", access_log=False)
        return
    settings = Settings.model_validate_json(settings_json)
    team = Team.from_yaml(Path(settings.teams_dirs[0]) / "bench.yaml", settings=settings)
    runner: list[Runner] = []

    def run() -> AsyncIterator[Event]:
        return runner[0].stream(REQUEST, template=TEMPLATE, thread_id=uuid.uuid4().hex)

    app = floor_app(events, run, live)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with open_backend(settings) as backend:  # as the server executes runs
            slots = asyncio.Semaphore(settings.max_concurrent_runs)
            runner.append(Runner(team.spec, backend, team.config, slots=slots))
            yield

    app.router.lifespan_context = lifespan
    serve(app, "127.0.0.1", port, log_level="warning", access_log=False)


class Floor(Teamgraph):
    """The floor server behind the benchmark's target interface (``settings``: with the runs)."""

    def __init__(
        self,
        root: Path,
        events: list[tuple[str, str]],
        settings: Settings | None = None,
        live: bool = True,
    ) -> None:
        self.root, self.settings, self.live = root, settings, live
        self.name = "floor" if settings is None else f"floor-runs-{'live' if live else 'after'}"
        self.events_file = root / "events.json"
        self.events_file.write_text(json.dumps(events))

    async def start(self, jobs: int | None = None) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = self.root / f"{self.name}.log"
        command = [sys.executable, __file__, "--serve-floor", str(self.events_file), str(port)]
        if self.settings is not None:
            command += [self.settings.model_dump_json(), "live" if self.live else "after"]
        self.process = _spawn(command, self.root, dict(os.environ), log)
        self.pid = self.process.pid
        await wait_healthy(self.process, f"{self.url}/health", log, 60)

    async def stop(self) -> None:
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
        floors: list[Floor] = []
        try:
            events = await one_stream(ours)
            settings = [
                server_settings(root, teams, f"sqlite:///{root}/floor-{kind}.db")
                for kind in ("live", "after")
            ]
            floors = [
                Floor(root, events, settings[0]),
                Floor(root, events, settings[1], live=False),
                Floor(root, events),
            ]
            for floor in floors:
                await floor.start()
            for server in (ours, *floors):
                await throughput(server, CONCURRENCY)  # warm-up
            figures: list[tuple[float, ...]] = []
            async with inprocess(root, teams) as measure:
                for _ in range(rounds):
                    measured = [(await throughput(server, runs))[1] for server in (ours, *floors)]
                    figures.append((*measured, await measure(runs)))
        finally:
            for server in (ours, *floors):
                await server.stop()
    report(figures, len(events), runs)
    return 0


def report(figures: list[tuple[float, ...]], events: int, runs: int) -> None:
    api, live, after, floor, local = (statistics.median(f) for f in zip(*figures, strict=True))
    print(f"events per run {events}; medians of {len(figures)} rounds of {runs} runs (ms of CPU)")
    print(f"through the API                          {api:6.2f} a run")
    print(f"runs behind empty routes, streamed live  {live:6.2f} a run")
    print(f"runs behind empty routes, stream after   {after:6.2f} a run")
    print(f"in-process (apart)                       {local:6.2f} a run")
    print(f"floor (empty routes, apart)              {floor:6.2f} a start + stream pair")
    lines = {
        "beyond runs streamed live": [f[0] - f[1] for f in figures],
        "beyond runs streamed after": [f[0] - f[2] for f in figures],
        "beyond, measured apart": [f[0] - f[4] - f[3] for f in figures],
    }
    for name, values in lines.items():
        print(f"{name:27} {statistics.median(values):5.2f}   by round: {_listed(values)}")
    figure = statistics.median(lines["beyond runs streamed live"])
    verdict = "met" if figure <= TARGET_MS else "missed"
    print(f"HTTP beyond the floor {figure:5.2f} ms per run (target ≤ {TARGET_MS} ms: {verdict})")


def _listed(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--serve-floor"]:
        settings_json = sys.argv[4] if len(sys.argv) > 4 else None
        serve_floor(sys.argv[2], int(sys.argv[3]), settings_json, sys.argv[5:6] != ["after"])
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
