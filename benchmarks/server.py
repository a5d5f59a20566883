"""HTTP service benchmark: runs per second and time to first event through the real server,
against the same team run in-process through ``Runner``.

The benchmark writes a 4-step workflow team (offline model, a fixed template: ``a`` → ``b``, ``c``
→ ``d``) to a temporary folder, starts ``uvicorn`` on 127.0.0.1 in a subprocess (SQLite in the
temporary folder, JSON logs and the access log off, rate limits lifted), and then measures:

* ``server runs_per_s``: ``--runs`` runs started through ``POST /api/v1/sessions/{id}/runs`` by
  ``--concurrency`` clients (one session each, a session runs one run at a time), each awaited by
  following ``GET /api/v1/runs/{id}/events`` to its end;
* ``server ttfe_p50_ms`` / ``ttfe_p99_ms``: ``--clients`` concurrent SSE clients (50), each starts
  a run and opens its event stream; time from sending the start request to the first ``data:``
  line (``--rounds`` rounds; target p99 ≤ 50 ms). ``stream_p50_ms`` / ``stream_p99_ms`` time from
  opening the stream only;
* ``seed stream`` / ``/api/chat``: the seed-000 chat stream route and seed-004's ``/api/chat``,
  one client at a time after the bursts: first byte (target ≤ 50 ms), first content line and the
  end (the first line must come before the run ends);
* ``first token``: a one-agent team's first answer token for a new conversation, natively
  (session, run, event stream), through ``POST /v1/chat/completions`` (``stream``), through
  ``POST /agui/{team}`` and through the Agent Protocol (``POST /langgraph/threads``, then
  ``…/runs/stream``), through MCP (``tools/call`` on an open ``/mcp`` session: the tool's result,
  as MCP streams no answer tokens) and through A2A (``message/stream`` to ``/a2a/{team}``: the
  first ``artifact-update``), and the differences of the medians (the adapters' cost);
* ``inprocess runs_per_s``: the same runs, same concurrency, through ``Runner.run`` on a backend
  of its own — the baseline; ``ratio`` is server / in-process.

The TTFE clients write and read HTTP/1.1 by hand on connections opened beforehand (see
``RawClient``): the figure is the server's, not httpx's. ``--database-url`` runs the server on
PostgreSQL. ``TEAMGRAPH_BENCH_PROFILE=file`` writes a cProfile of the server process.

Run ``python benchmarks/server.py`` (about a minute) or ``--quick`` (smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from teamgraph.config import Settings
from teamgraph.runtime.team_api import Team

TTFE_TARGET_MS = 50.0
PASSWORD = "Bench-passw0rd!"
REQUEST = "Benchmark request: compare two options and summarise the result."
TEMPLATE = "bench4"
START = "/api/v1/sessions/{session_id}/runs"
EVENTS = "/api/v1/runs/{run_id}/events"
UNLIMITED = {group: "1000000/second" for group in ("chat", "stream", "register", "login")}
ENDINGS = ("run_completed", "run_failed", "run_cancelled", "approval_requested")

TEAM_YAML = """\
name: bench
description: Four-step benchmark workflow (offline model).
pattern: workflow
model: offline
members:
  - name: worker
    description: Does one benchmark step.
    instructions: Do the step you are given in one short paragraph.
workflow:
  max_parallel: 4
  synthesizer: concat
  templates_dirs: [{templates}]
"""

CHAT_TEAM_YAML = """\
name: bench_chat
description: One agent whose answer streams token by token (offline model).
pattern: single
model: offline
members:
  - name: worker
    description: Answers in one short paragraph.
"""

TEMPLATE_YAML = """\
name: bench4
description: Four steps, two of them in parallel.
steps:
  - {id: a, worker: worker, task: Outline the two options.}
  - {id: b, worker: worker, task: List the strengths of each option., depends_on: [a]}
  - {id: c, worker: worker, task: List the weaknesses of each option., depends_on: [a]}
  - {id: d, worker: worker, task: Summarise which option wins and why., depends_on: [b, c]}
"""


class BenchmarkError(Exception):
    """The benchmark cannot run (missing routes, server that does not start, failed runs)."""


# --------------------------------------------------------------------------------------------
# setup


def write_team(root: Path) -> Path:
    templates, teams = root / "templates", root / "teams"
    templates.mkdir()
    teams.mkdir()
    (templates / "bench4.yaml").write_text(TEMPLATE_YAML)
    (teams / "bench.yaml").write_text(TEAM_YAML.format(templates=templates))
    (teams / "bench_chat.yaml").write_text(CHAT_TEAM_YAML)
    return teams


def server_settings(root: Path, teams: Path, database_url: str | None) -> Settings:
    return Settings(
        database_url=database_url or f"sqlite:///{root}/server.db",
        teams_dirs=[str(teams)],
        jwt_secret=uuid.uuid4().hex * 2,
        knowledge_path=root / "knowledge.db",
        rate_limits=UNLIMITED,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def serve(settings_json: str, port: int) -> None:
    """The server subprocess (``--serve``)."""
    import uvicorn

    from teamgraph.server.app import create_app
    from teamgraph.server.app import serve as serve_app

    settings = Settings.model_validate_json(settings_json)
    app = create_app(settings)
    profile = os.environ.get("TEAMGRAPH_BENCH_PROFILE")  # a file for the server's cProfile
    if profile:
        import cProfile
        import signal

        signal.signal(signal.SIGTERM, lambda *_: None)  # uvicorn re-raises it once it stopped
        with cProfile.Profile() as profiler:
            uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        profiler.dump_stats(profile)
        return
    serve_app(app, "127.0.0.1", port, log_level="warning", access_log=False)  # as `teamgraph serve`


class Server:
    """``uvicorn`` in a subprocess; stderr goes to a file shown when something fails."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / "server.log"
        env = {**os.environ, "TEAMGRAPH_JSON_LOGS": "false"}
        command = [sys.executable, __file__, "--serve", settings.model_dump_json(), str(self.port)]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=env)

    async def wait_ready(self, within_s: float = 60.0) -> None:
        await wait_healthy(self.process, f"{self.url}/health", self.log, within_s)

    def log_tail(self) -> str:
        return log_tail(self.log)

    def stop(self) -> None:
        stop_process(self.process)


def log_tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


async def wait_healthy(
    process: subprocess.Popen[bytes], health: str, log: Path, within_s: float
) -> None:
    """Until ``health`` answers 200; a process that exits first fails with its log's tail."""
    deadline = time.monotonic() + within_s
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                command = " ".join(map(str, process.args))[:80]  # type: ignore[arg-type]
                raise BenchmarkError(f"{command} exited:\n{log_tail(log)}")
            try:
                if (await http.get(health)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise BenchmarkError(f"{health} did not answer in {within_s} s")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --------------------------------------------------------------------------------------------
# the API client


@dataclass
class Api:
    http: httpx.AsyncClient
    headers: dict[str, str]

    @classmethod
    async def login(cls, http: httpx.AsyncClient) -> Api:
        email = f"bench-{uuid.uuid4().hex[:8]}@example.com"
        registered = await http.post(
            "/api/v1/auth/register", json={"email": email, "password": PASSWORD}
        )
        _expect(registered, 201)
        login = await http.post(
            "/api/v1/auth/login", data={"username": email, "password": PASSWORD}
        )
        _expect(login, 200)
        return cls(http, {"Authorization": f"Bearer {login.json()['access_token']}"})

    async def check_runs_api(self) -> None:
        paths = (await self.http.get("/openapi.json")).json().get("paths", {})
        missing = [
            path
            for path, method in (
                ("/api/v1/sessions/{session_id}/runs", "post"),
                ("/api/v1/runs/{run_id}/events", "get"),
            )
            if method not in paths.get(path, {})
        ]
        if missing:
            raise BenchmarkError(
                "the server has no runs API yet (missing "
                + ", ".join(missing)
                + "): teamgraph.server.app.create_app must include the runs routes"
            )

    async def session(self, team: str = "bench") -> str:
        for attempt in range(3):  # a kept-alive connection the server just closed: try again
            try:
                created = await self.http.post(
                    "/api/v1/auth/session", json={"team": team}, headers=self.headers
                )
                break
            except httpx.TransportError:
                if attempt == 2:
                    raise
        _expect(created, 201)
        session_id: str = created.json()["session_id"]
        return session_id

    async def start(self, session_id: str) -> str:
        response = await self.http.post(
            START.format(session_id=session_id),
            json={"input": REQUEST, "template": TEMPLATE},
            headers=self.headers,
        )
        _expect(response, 200, 201, 202)
        run_id: str = response.json()["run_id"]
        return run_id

    async def follow(self, run_id: str, first: Callable[[], None] | None = None) -> str:
        """Read the run's event stream to its end; ``first`` is called on the first ``data:``
        line. Returns the last event type."""
        last = ""
        headers = {**self.headers, "Accept": "text/event-stream"}
        async with self.http.stream("GET", EVENTS.format(run_id=run_id), headers=headers) as r:
            if r.status_code != 200:
                await r.aread()
                _expect(r, 200)
            async for line in r.aiter_lines():
                if line.startswith("data:") and first is not None:
                    first()
                    first = None
                elif line.startswith("event:"):
                    last = line.removeprefix("event:").strip()
        return last

    async def run(self, session_id: str) -> None:
        run_id = await self.start(session_id)
        last = await self.follow(run_id)
        if last != "run_completed":
            raise BenchmarkError(f"run {run_id} ended with {last or 'no event'!r}")


def _expect(response: httpx.Response, *codes: int) -> None:
    if response.status_code not in codes:
        raise BenchmarkError(
            f"{response.request.method} {response.request.url.path} → "
            f"{response.status_code}: {response.text[:300]}"
        )


# --------------------------------------------------------------------------------------------
# measurements


async def throughput(run_one: Callable[[int], Awaitable[None]], runs: int, workers: int) -> float:
    """Runs per second: runs ``0..runs-1`` shared out among ``workers`` (one at a time each)."""
    todo = iter(range(runs))

    async def worker() -> None:
        for index in todo:
            await run_one(index)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return runs / (time.perf_counter() - start)


async def server_throughput(api: Api, runs: int, concurrency: int) -> float:
    # a session per run, made beforehand: the runs API refuses a second run on a session while
    # the first one is still closing (just after its stream ended)
    sessions = [await api.session() for _ in range(runs + 1)]
    await api.run(sessions[-1])  # warm-up: runner built, team loaded, tables warm
    return await throughput(lambda i: api.run(sessions[i]), runs, concurrency)


@dataclass
class Ttfe:
    total: list[float]  # ms from the start request to the first ``data:`` line
    stream: list[float]  # ms from opening the stream to it
    errors: list[str]  # clients that failed, and why


class RawClient:
    """One kept-alive HTTP/1.1 connection written and read by hand (asyncio streams).

    The TTFE clients use it instead of httpx: 50 httpx requests and streams in one Python
    process cost the client tens of milliseconds of CPU, which the measure would then charge to
    the server. This client costs a few microseconds per request; the figure is still "start
    request sent → first ``data:`` line read", taken on the client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, url: str) -> RawClient:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> None:
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    async def head(self) -> tuple[int, dict[str, str]]:
        status = await self.reader.readuntil(b"\r\n")
        headers: dict[str, str] = {}
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status.split()[1]), headers

    async def response(self) -> tuple[int, bytes]:
        status, headers = await self.head()
        if headers.get("transfer-encoding") == "chunked":
            return status, b"".join([chunk async for chunk in self.chunks()])
        return status, await self.reader.readexactly(int(headers.get("content-length", "0")))

    async def chunks(self) -> AsyncIterator[bytes]:
        while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
            yield (await self.reader.readexactly(size + 2))[:-2]
        await self.reader.readuntil(b"\r\n")

    async def follow(self, first: Callable[[], None]) -> str:
        """Read an event stream to its end; ``first`` is called as soon as a ``data:`` line
        arrives. Returns the last event type."""
        status, headers = await self.head()
        if status != 200 or headers.get("transfer-encoding") != "chunked":
            raise BenchmarkError(f"events → {status} {headers}")
        text = ""
        async for chunk in self.chunks():
            if "data:" not in text and b"data:" in chunk:
                first()
            text += chunk.decode()
        kinds = [line[6:].strip() for line in text.splitlines() if line.startswith("event:")]
        return kinds[-1] if kinds else ""

    def close(self) -> None:
        self.writer.close()


async def time_to_first_event(api: Api, url: str, clients: int, rounds: int) -> Ttfe:
    """``rounds`` times, ``clients`` clients at once (each on a connection opened beforehand):
    start a run, open its stream on the same connection, read it to the end."""
    result = Ttfe([], [], [])
    body = json.dumps({"input": REQUEST, "template": TEMPLATE}).encode()
    json_headers = {**api.headers, "Content-Type": "application/json"}
    sse_headers = {**api.headers, "Accept": "text/event-stream"}

    async def client(session_id: str, http: RawClient, barrier: asyncio.Event) -> None:
        await barrier.wait()
        sent = time.perf_counter()
        try:
            http.send("POST", START.format(session_id=session_id), json_headers, body)
            status, answer = await http.response()
            if status not in (200, 201, 202):
                raise BenchmarkError(f"start → {status}: {answer[:300]!r}")
            run_id = json.loads(answer)["run_id"]
            opened = time.perf_counter()
            http.send("GET", EVENTS.format(run_id=run_id), sse_headers)

            def first() -> None:
                now = time.perf_counter()
                result.total.append((now - sent) * 1000)
                result.stream.append((now - opened) * 1000)

            last = await http.follow(first)
            if last != "run_completed":
                raise BenchmarkError(f"run {run_id} ended with {last or 'no event'!r}")
        except (BenchmarkError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            error = str(exc) or type(exc).__name__
            result.errors.append(f"{error} (after {time.perf_counter() - sent:.1f} s)")
        finally:
            http.close()

    for _ in range(rounds):
        sessions = [await api.session() for _ in range(clients)]
        connections = [await RawClient.connect(url) for _ in range(clients)]
        barrier = asyncio.Event()
        tasks = [
            asyncio.create_task(client(s, c, barrier))
            for s, c in zip(sessions, connections, strict=True)
        ]
        await asyncio.sleep(0.05)  # every client waits at the barrier
        barrier.set()
        await asyncio.gather(*tasks)
    return result


async def inprocess_throughput(
    root: Path, teams: Path, runs: int, concurrency: int, database_url: str | None
) -> float:
    settings = server_settings(root, teams, None)
    settings = settings.model_copy(
        update={"database_url": database_url or f"sqlite:///{root}/inprocess.db"}
    )
    team = Team.from_yaml(teams / "bench.yaml", settings=settings)
    gc.collect()
    gc.freeze()  # the start-up heap frozen, as `teamgraph serve` freezes the server's
    async with team.runner() as runner:

        async def run_one(_index: int) -> None:
            result = await runner.run(REQUEST, template=TEMPLATE, thread_id=uuid.uuid4().hex)
            if result.status != "completed":
                raise BenchmarkError(f"in-process run ended {result.status}: {result.error}")

        await run_one(-1)  # warm-up
        return await throughput(run_one, runs, concurrency)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


# --------------------------------------------------------------------------------------------
# main


async def benchmark(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="teamgraph-bench-") as tmp:
        root = Path(tmp)
        teams = write_team(root)
        server = Server(server_settings(root, teams, args.database_url), root)
        try:
            await server.wait_ready()
            limits = httpx.Limits(max_connections=args.clients * 2 + 10)
            timeout = httpx.Timeout(120.0)
            async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=timeout) as h:
                api = await Api.login(h)
                await api.check_runs_api()
                if args.protocols_only:
                    await protocol_ttft(api, args.rounds * 10)
                    return 0
                server_rps = await server_throughput(api, args.runs, args.concurrency)
                print(f"server runs_per_s {server_rps:.1f}", flush=True)
                ttfe = await time_to_first_event(api, server.url, args.clients, args.rounds)
                await seed_stream(api, args.rounds * 5)
                await protocol_ttft(api, args.rounds * 10)
        except (BenchmarkError, httpx.HTTPError) as exc:
            print(f"benchmark failed: {exc!r}", file=sys.stderr)
            if server.process.poll() is not None or args.verbose:
                print(server.log_tail(), file=sys.stderr)
            return 1
        finally:
            server.stop()
        report_ttfe(ttfe, args.clients * args.rounds)
        inproc_rps = await inprocess_throughput(
            root, teams, args.runs, args.concurrency, args.inprocess_database_url
        )
        print(f"inprocess runs_per_s {inproc_rps:.1f}")
        print(f"ratio server/inprocess {server_rps / inproc_rps:.2f}")
    return 1 if ttfe.errors else 0


Opened = tuple[str, dict[str, Any], dict[str, str]]  # url, JSON body, headers


async def seed_stream(api: Api, runs: int) -> None:
    """The seeds' chat streams, one client on an otherwise idle server: time to the
    response's first byte (its headers), to the first content line (the plan), and to the
    end line (the run's end) — seed-000's ``POST …/workflow/chat/stream`` (``data:`` lines,
    then ``done``) and seed-004's ``POST /api/chat`` (``0:`` text parts, then ``d:``)."""
    await _timed_stream(api, "seed stream", runs, _seed000, ("data:", '"done": true'))
    await _timed_stream(api, "/api/chat", runs, _seed004, ("0:", "d:"))


async def _seed000(api: Api) -> Opened:
    created = await api.http.post(
        "/api/v1/auth/session", json={"team": "bench"}, headers=api.headers
    )
    _expect(created, 201)
    token = {"Authorization": f"Bearer {created.json()['token']['access_token']}"}
    body = {"messages": [{"role": "user", "content": REQUEST}]}
    return f"/api/v1/chatbot/workflow/chat/stream?template={TEMPLATE}", body, token


async def _seed004(api: Api) -> Opened:
    session_id = await api.session()
    body = {"messages": [{"role": "user", "content": REQUEST}], "sessionId": session_id}
    return "/api/chat", body, api.headers


async def _timed_stream(
    api: Api,
    label: str,
    runs: int,
    opened: Callable[[Api], Awaitable[Opened]],
    marks: tuple[str, str],
) -> None:
    heads, firsts, ends = [], [], []
    for _ in range(runs):
        url, body, headers = await opened(api)
        started, first = time.perf_counter(), 0.0
        async with api.http.stream("POST", url, json=body, headers=headers) as response:
            heads.append(time.perf_counter() - started)
            async for line in response.aiter_lines():
                if line.startswith(marks[0]):
                    first = first or time.perf_counter() - started
                if marks[1] in line:
                    break
        firsts.append(first)
        ends.append(time.perf_counter() - started)
    for name, values in (("first byte", heads), ("first line", firsts), ("done", ends)):
        print(
            f"{label} {name:<10} p50 {statistics.median(values) * 1000:6.1f} ms"
            f"  max {max(values) * 1000:6.1f} ms",
            flush=True,
        )
    before = sum(0 < f < e for f, e in zip(firsts, ends, strict=True))
    print(f"{label} first line before the run ended: {before}/{runs}", flush=True)


async def protocol_ttft(api: Api, rounds: int) -> None:
    """Time to the first answer token of a new conversation with a one-agent team, one client
    on an idle server: the native way (``POST /api/v1/auth/session``, ``POST …/runs``, then
    ``GET …/events`` to the first ``token`` event), through ``POST /v1/chat/completions``
    (``stream``: the first chunk with content) and through ``POST /agui/{team}`` (the first
    ``TEXT_MESSAGE_CONTENT``) — both make the session themselves — alternating; an adapter's
    cost is the difference of the medians."""
    names = ("native", "openai", "agui", "langgraph", "mcp", "a2a")
    times: dict[str, list[float]] = {name: [] for name in names}
    mcp = await McpSession.open(api)
    for _ in range(rounds):
        times["native"].append(await _native_first_token(api))
        times["openai"].append(await _openai_first_token(api))
        times["agui"].append(await _agui_first_token(api))
        times["langgraph"].append(await _langgraph_first_token(api))
        times["mcp"].append(await mcp.first_token())
        times["a2a"].append(await _a2a_first_token(api))
    await mcp.close()
    p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
    for name, value in p50.items():
        print(f"first token {name:<9} p50 {value:6.2f} ms", flush=True)
    for name in names[1:]:
        print(f"first token {name} - native p50 {p50[name] - p50['native']:+.2f} ms", flush=True)


async def _native_first_token(api: Api) -> float:
    started = time.perf_counter()  # a new conversation: its session, its run, its stream
    session_id = await api.session("bench_chat")
    response = await api.http.post(
        START.format(session_id=session_id), json={"input": REQUEST}, headers=api.headers
    )
    _expect(response, 200, 201, 202)
    first = 0.0
    url = EVENTS.format(run_id=response.json()["run_id"])
    async with api.http.stream("GET", url, headers=api.headers) as events:
        async for line in events.aiter_lines():
            if line == "event: token":
                first = first or time.perf_counter() - started
            if line in ("event: run_completed", "event: run_failed", "event: run_cancelled"):
                break
    return first


async def _openai_first_token(api: Api) -> float:
    body = {
        "model": "bench_chat",
        "stream": True,
        "messages": [{"role": "user", "content": REQUEST}],
    }
    started, first = time.perf_counter(), 0.0
    async with api.http.stream(
        "POST", "/v1/chat/completions", json=body, headers=api.headers
    ) as response:
        async for line in response.aiter_lines():
            if '"content": "' in line and '"content": ""' not in line:
                first = first or time.perf_counter() - started
            if line == "data: [DONE]":
                break
    return first


async def _agui_first_token(api: Api) -> float:
    body = {
        "threadId": uuid.uuid4().hex,
        "runId": uuid.uuid4().hex,
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": REQUEST}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    started, first = time.perf_counter(), 0.0
    async with api.http.stream("POST", "/agui/bench_chat", json=body, headers=api.headers) as r:
        async for line in r.aiter_lines():
            if '"type":"TEXT_MESSAGE_CONTENT"' in line:
                first = first or time.perf_counter() - started
            if '"type":"RUN_FINISHED"' in line or '"type":"RUN_ERROR"' in line:
                break
    return first


async def _langgraph_first_token(api: Api) -> float:
    started, first = time.perf_counter(), 0.0  # as langgraph-sdk does: a thread, then the run
    thread = await api.http.post("/langgraph/threads", json={}, headers=api.headers)
    _expect(thread, 200)
    url = f"/langgraph/threads/{thread.json()['thread_id']}/runs/stream"
    body = {
        "assistant_id": "bench_chat",
        "input": {"messages": [{"role": "user", "content": REQUEST}]},
        "stream_mode": ["messages-tuple"],
    }
    async with api.http.stream("POST", url, json=body, headers=api.headers) as response:
        async for line in response.aiter_lines():
            if line == "event: messages":
                first = first or time.perf_counter() - started
    return first


@dataclass
class McpSession:
    """An MCP session on ``/mcp`` (streamable HTTP, by hand: initialize, then calls)."""

    api: Api
    headers: dict[str, str]

    @classmethod
    async def open(cls, api: Api) -> McpSession:
        headers = {**api.headers, "Accept": "application/json, text/event-stream"}
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
        opened = await api.http.post("/mcp", json=hello, headers=headers)
        _expect(opened, 200)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = "2025-06-18"
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        _expect(await api.http.post("/mcp", json=ready, headers=headers), 202)
        return cls(api, headers)

    async def first_token(self) -> float:
        """Time to the tool's result (the answer: MCP sends no answer tokens before it)."""
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "bench_chat",
                "arguments": {"request": REQUEST},
                "_meta": {"progressToken": 1},
            },
        }
        started, first = time.perf_counter(), 0.0
        async with self.api.http.stream("POST", "/mcp", json=call, headers=self.headers) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:") and '"result"' in line:
                    first = time.perf_counter() - started
                    break
        return first

    async def close(self) -> None:
        await self.api.http.delete("/mcp", headers=self.headers)


async def _a2a_first_token(api: Api) -> float:
    message = {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": [{"kind": "text", "text": REQUEST}],
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}
    started, first = time.perf_counter(), 0.0
    async with api.http.stream("POST", "/a2a/bench_chat", json=call, headers=api.headers) as r:
        async for line in r.aiter_lines():
            if '"artifact-update"' in line:
                first = first or time.perf_counter() - started
            if '"final": true' in line or '"final":true' in line:
                break
    return first


def report_ttfe(ttfe: Ttfe, clients: int) -> None:
    if ttfe.total:
        p50, p99 = percentile(ttfe.total, 50), percentile(ttfe.total, 99)
        print(f"server ttfe_p50_ms {p50:.1f} ttfe_p99_ms {p99:.1f}")
        print(
            f"server stream_p50_ms {percentile(ttfe.stream, 50):.1f} "
            f"stream_p99_ms {percentile(ttfe.stream, 99):.1f} "
            f"(n={len(ttfe.total)}, mean {statistics.fmean(ttfe.total):.1f} ms)"
        )
        verdict = "ok" if p99 <= TTFE_TARGET_MS else "ABOVE TARGET"
        print(f"server ttfe_p99 target {TTFE_TARGET_MS:.0f} ms: {verdict}")
    if ttfe.errors:
        print(f"server ttfe_errors {len(ttfe.errors)}/{clients}, first: {ttfe.errors[0]}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--serve"]:
        serve(argv[1], int(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=200, help="runs for runs_per_s")
    parser.add_argument("--concurrency", type=int, default=10, help="clients for runs_per_s")
    parser.add_argument("--clients", type=int, default=50, help="concurrent SSE clients")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --clients for TTFE")
    parser.add_argument("--quick", action="store_true", help="smoke run: few runs, one round")
    parser.add_argument("--database-url", help="server database (default: SQLite in a temp dir)")
    parser.add_argument("--inprocess-database-url", help="baseline database (default: SQLite)")
    parser.add_argument(
        "--protocols-only", action="store_true", help="only first token per protocol"
    )
    parser.add_argument("--verbose", action="store_true", help="show the server log on errors")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rounds = min(args.runs, 20), 1
    return asyncio.run(benchmark(args))


if __name__ == "__main__":
    sys.exit(main())
