"""Operations: rate limits, body limit, CORS, /health, /metrics, request ids and JSON logs."""

from __future__ import annotations

import gc
import json
import logging
import re
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from langchain_core.tools import tool
from sqlalchemy.ext.asyncio import create_async_engine

from teamgraph.config import Settings
from teamgraph.errors import UsageError
from teamgraph.runtime.team_api import Team
from teamgraph.server.app import create_app
from teamgraph.server.app import serve as serve_app
from teamgraph.server.logging import bind_run, json_logging
from teamgraph.server.ops import metrics_of
from teamgraph.server.ratelimit import Limit, SlidingWindowLimiter, route_group
from teamgraph.server.state import AppState
from teamgraph.server.worker import Worker
from teamgraph.storage.direct import Direct
from teamgraph.storage.run_store import SqlRunStore
from teamgraph.testing import ScriptedChatModel, ToolCall

from .conftest import PASSWORD, make_session, make_user

Serve = Callable[..., AbstractAsyncContextManager[FastAPI]]


@pytest.fixture
def serve(api_settings: Settings) -> Serve:
    """An app on ``api_settings`` with some settings replaced, its lifespan running."""

    @asynccontextmanager
    async def running(**overrides: Any) -> AsyncIterator[FastAPI]:
        app = create_app(api_settings.model_copy(update=overrides))
        async with app.router.lifespan_context(app):
            yield app

    return running


def client_for(app: FastAPI, ip: str = "10.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(ip, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://test")


def state_of(app: FastAPI) -> AppState:
    state: AppState = app.state.teamgraph
    return state


async def register(http: httpx.AsyncClient, email: str) -> httpx.Response:
    return await http.post("/api/v1/auth/register", json={"email": email, "password": PASSWORD})


# --- rate limits ---------------------------------------------------------------------------


def test_limits_parse_and_routes_fall_in_groups() -> None:
    assert Limit.parse("30/minute") == Limit(30, 60.0, "30/minute")
    assert Limit.parse("2 / hours").period == 3600.0
    for bad in ("30", "0/minute", "x/second", "3/fortnight"):
        with pytest.raises(UsageError, match="rate limit"):
            Limit.parse(bad)
    assert route_group("POST", "/api/v1/auth/register") == "register"
    assert route_group("POST", "/api/v1/auth/login") == "login"
    assert route_group("GET", "/api/v1/auth/login") is None
    assert route_group("POST", "/api/v1/chatbot/chat") == "chat"
    assert route_group("POST", "/api/chat") == "chat"
    assert route_group("POST", "/api/v1/sessions/s1/runs") == "chat"
    assert route_group("GET", "/api/v1/sessions/s1/runs") is None
    assert route_group("POST", "/api/v1/chatbot/chat/stream") == "stream"
    assert route_group("GET", "/api/v1/runs/r1/events") == "stream"
    assert route_group("GET", "/api/v1/teams") is None


def test_sliding_window_admits_again_as_old_hits_age_out() -> None:
    now = [0.0]
    limiter = SlidingWindowLimiter(clock=lambda: now[0])
    limit = Limit.parse("2/minute")
    assert limiter.hit(["k"], limit) == 0
    now[0] = 30.0
    assert limiter.hit(["k"], limit) == 0
    now[0] = 40.0
    assert limiter.hit(["k"], limit) == pytest.approx(20.0)  # the hit at 0 s ages out at 60 s
    now[0] = 60.0
    assert limiter.hit(["k"], limit) == 0  # the window slid past the first hit
    now[0] = 61.0
    assert limiter.hit(["k"], limit) == pytest.approx(29.0)  # refused hits are not recorded
    assert limiter.hit(["other"], limit) == 0  # keys are independent
    # several keys: admitted only when all admit, and then recorded under all
    assert limiter.hit(["other", "k"], limit) > 0
    assert limiter.hit(["other"], limit) == 0


async def test_third_register_is_429_with_retry_after(serve: Serve) -> None:
    async with serve(rate_limits={"register": "2/hour"}) as app, client_for(app) as http:
        assert (await register(http, "a@example.com")).status_code == 201
        assert (await register(http, "a@example.com")).status_code == 409  # counts as well
        third = await register(http, "b@example.com")
        assert third.status_code == 429
        assert third.json() == {"detail": "Rate limit exceeded: register 2/hour"}
        assert 3590 <= int(third.headers["Retry-After"]) <= 3600
        # other groups are not limited by this one
        login = await http.post(
            "/api/v1/auth/login", data={"username": "a@example.com", "password": PASSWORD}
        )
        assert login.status_code == 200
        scraped = (await http.get("/metrics")).text
        assert (
            'teamgraph_http_request_duration_seconds_count{method="POST",'
            'route="/api/v1/auth/register",status="429"} 1.0'
        ) in scraped


async def test_login_is_limited_per_client_ip(serve: Serve) -> None:
    async with serve(rate_limits={"login": "2/minute"}) as app:
        form = {"username": "nobody@example.com", "password": "Wrong-pass1!"}
        async with client_for(app, "10.0.0.1") as first, client_for(app, "10.0.0.2") as second:
            codes = [
                (await first.post("/api/v1/auth/login", data=form)).status_code for _ in "abcd"
            ]
            assert codes == [401, 401, 429, 429]
            assert (await second.post("/api/v1/auth/login", data=form)).status_code == 401


async def test_chat_limit_is_per_user_and_per_ip(serve: Serve) -> None:
    async with (
        serve(rate_limits={"chat": "2/minute"}) as app,
        client_for(app, "10.0.0.1") as ip1,
        client_for(app, "10.0.0.2") as ip2,
    ):
        alice = await make_user(ip1, "alice@example.com")
        bob = await make_user(ip2, "bob@example.com")
        path = f"/api/v1/sessions/{uuid.uuid4().hex}/runs"
        body = {"input": "hello"}
        for _ in range(2):
            response = await ip1.post(path, json=body, headers=alice.headers)
            assert response.status_code != 429
        assert (await ip1.post(path, json=body, headers=alice.headers)).status_code == 429
        # bob has his own budget; alice from another address is still alice
        assert (await ip2.post(path, json=body, headers=bob.headers)).status_code != 429
        limited = await ip2.post(path, json=body, headers=alice.headers)
        assert limited.status_code == 429
        assert limited.json()["detail"] == "Rate limit exceeded: chat 2/minute"
        # without a token only the address counts: 10.0.0.1 has used its two
        assert (await ip1.post(path, json=body)).status_code == 429
        # an invalid token is just an anonymous client of that address
        async with client_for(app, "10.0.0.3") as ip3:
            bad = {"Authorization": "Bearer nonsense"}
            assert (await ip3.post(path, json=body, headers=bad)).status_code != 429


async def test_an_api_key_user_is_limited_as_that_user_from_any_address(serve: Serve) -> None:
    """The limiter reads credentials as the routes do: an API key (as a bearer token or in
    ``x-api-key``) counts against its user, whichever address it comes from; a revoked key is
    an anonymous client at once."""
    async with (
        serve(rate_limits={"chat": "3/minute"}) as app,
        client_for(app, "10.0.0.1") as ip1,
        client_for(app, "10.0.0.2") as ip2,
        client_for(app, "10.0.0.3") as ip3,
    ):
        alice = await make_user(ip1, "alice@example.com")
        made = await ip1.post("/api/v1/auth/api-keys", json={}, headers=alice.headers)
        key = made.json()["key"]
        path = f"/api/v1/sessions/{uuid.uuid4().hex}/runs"
        body = {"input": "hello"}
        assert (await ip1.post(path, json=body, headers={"x-api-key": key})).status_code == 404
        bearer = {"Authorization": f"Bearer {key}"}
        assert (await ip2.post(path, json=body, headers=bearer)).status_code == 404
        assert (await ip3.post(path, json=body, headers=alice.headers)).status_code == 404
        limited = await ip3.post(path, json=body, headers={"x-api-key": key})
        assert limited.status_code == 429, limited.text
        revoked = await ip1.delete(
            f"/api/v1/auth/api-keys/{made.json()['id']}", headers=alice.headers
        )
        assert revoked.status_code == 204
        async with client_for(app, "10.0.0.4") as ip4:
            anonymous = await ip4.post(path, json=body, headers={"x-api-key": key})
            assert anonymous.status_code == 401 and "revoked" in anonymous.json()["detail"]


async def test_an_address_over_its_limit_is_refused_before_any_key_is_looked_up(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys sprayed from one address cost the database nothing once the address is over."""
    async with serve(rate_limits={"chat": "1/minute"}) as app, client_for(app) as http:
        authenticator = state_of(app).authenticator
        looked_up: list[str] = []
        resolve = authenticator.claims

        async def counted(token: str) -> Any:
            looked_up.append(token)
            return await resolve(token)

        monkeypatch.setattr(authenticator, "claims", counted)
        path = f"/api/v1/sessions/{uuid.uuid4().hex}/runs"
        first = await http.post(path, json={"input": "hi"}, headers={"x-api-key": "tg-guess-1"})
        second = await http.post(path, json={"input": "hi"}, headers={"x-api-key": "tg-guess-2"})
        assert (first.status_code, second.status_code) == (401, 429)
        assert looked_up == ["tg-guess-1", "tg-guess-1"]  # the limiter's and the route's


# --- body limit and CORS -------------------------------------------------------------------


async def test_bodies_over_the_limit_are_413(serve: Serve) -> None:
    async with serve(max_body_bytes=1024) as app, client_for(app) as http:
        big = {"email": "big@example.com", "password": PASSWORD, "pad": "x" * 2000}
        declared = await http.post("/api/v1/auth/register", json=big)
        assert declared.status_code == 413
        assert declared.json() == {"detail": "Request body too large: the limit is 1024 bytes"}

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
            for _ in range(8):
                yield b" " * 300

        streamed = await http.post(
            "/api/v1/auth/register",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert streamed.status_code == 413 and "1024 bytes" in streamed.json()["detail"]
        small = await register(http, "small@example.com")
        assert small.status_code == 201


async def test_cors_headers_only_when_configured(serve: Serve) -> None:
    origin = "https://app.example.com"
    async with serve(cors_origins=[origin]) as app, client_for(app) as http:
        preflight = await http.options(
            "/api/v1/auth/login",
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == origin
        simple = await http.get("/health", headers={"Origin": origin})
        assert simple.headers["access-control-allow-origin"] == origin
        assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()
        other = await http.get("/health", headers={"Origin": "https://evil.example.com"})
        assert "access-control-allow-origin" not in other.headers
    async with serve() as app, client_for(app) as http:
        plain = await http.get("/health", headers={"Origin": origin})
        assert "access-control-allow-origin" not in plain.headers


# --- health and metrics --------------------------------------------------------------------


async def test_health_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "role": "api+runs"}
    ready = await client.get("/ready")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "database": "ok", "role": "api+runs"}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_not_ready_but_alive_while_the_database_is_down(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = await make_user(client, "outage@example.com")
    backend = state_of(app).backend
    broken = create_async_engine(f"postgresql+psycopg://u@127.0.0.1:{closed_port()}/none")
    monkeypatch.setattr(backend, "engine", broken)
    monkeypatch.setattr(backend, "runs", SqlRunStore(broken, Direct(broken)))
    try:
        response = await client.get("/ready")
        assert response.status_code == 503 and response.headers["Retry-After"] == "2"
        body = response.json()
        assert body["ready"] is False
        assert body["database"].startswith("OperationalError") and body["database"] != "ok"
        alive = await client.get("/health")  # liveness: a restart must not restart the process
        assert alive.status_code == 200 and alive.json()["status"] == "ok"
        # a request that needs the database meets the outage: 503 with Retry-After, never 500
        runs = await client.get("/api/v1/runs/0123abcd", headers=user.headers)
        assert runs.status_code == 503 and runs.headers["Retry-After"] == "2", runs.text
        scraped = await client.get("/metrics")  # metrics still answer, database_up says 0
        assert scraped.status_code == 200 and "teamgraph_database_up 0.0" in scraped.text
    finally:
        await broken.dispose()


async def test_metrics(app: FastAPI, client: httpx.AsyncClient) -> None:
    await client.get("/health")
    await client.get("/api/v1/no-such-route")
    state = state_of(app)
    for status in ("running", "completed", "completed"):
        await state.backend.runs.create(
            {
                "id": uuid.uuid4().hex,
                "thread_id": "t",
                "team_name": "research",
                "team_spec": {},
                "pattern": "workflow",
                "input": "hi",
                "status": status,
            }
        )
    metrics = metrics_of(state)
    assert metrics is metrics_of(app)
    metrics.observe_step(0.3)
    metrics.add_usage(120, 0.002)
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert (
        'teamgraph_http_request_duration_seconds_count{method="GET",route="/health",status="200"}'
    ) in text
    assert 'route="unmatched",status="404"' in text  # raw paths never become labels
    assert "no-such-route" not in text
    assert 'teamgraph_runs{status="running"} 1.0' in text
    assert 'teamgraph_runs{status="completed"} 2.0' in text
    assert "teamgraph_database_up 1.0" in text
    assert "teamgraph_step_duration_seconds_count 1.0" in text
    assert "teamgraph_tokens_total 120.0" in text
    assert "teamgraph_cost_usd_total 0.002" in text


async def test_metrics_registries_are_per_app(serve: Serve) -> None:
    async with serve() as first, serve() as second:
        metrics_of(first).add_usage(5, 0.0)
        assert metrics_of(first).registry is not metrics_of(second).registry
        async with client_for(second) as http:
            assert "teamgraph_tokens_total 0.0" in (await http.get("/metrics")).text


# --- request ids and JSON logs -------------------------------------------------------------


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def test_request_id_is_echoed_and_logged_as_json(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEAMGRAPH_JSON_LOGS", "true")
    async with serve() as app, client_for(app) as http:
        given = await http.get("/health", headers={"X-Request-ID": "req-42"})
        assert given.headers["x-request-id"] == "req-42"
        generated = await http.get("/health")
        assert len(generated.headers["x-request-id"]) == 32
        unsafe = await http.get("/health", headers={"X-Request-ID": "bad id\n"})
        assert unsafe.headers["x-request-id"] != "bad id"
        with bind_run("run-7"):
            logging.getLogger("teamgraph.runs").warning("step %s failed", "s1")
    lines = json_lines(capsys.readouterr().err)
    access = [line for line in lines if line.get("request_id") == "req-42"]
    assert access, lines
    assert access[0]["logger"] == "teamgraph.server.access"
    assert access[0]["level"] == "INFO" and access[0]["status"] == 200
    assert access[0]["route"] == "/health" and "GET /health 200" in access[0]["message"]
    assert {"time", "level", "logger", "message"} <= set(access[0])
    assert any(line.get("request_id") == generated.headers["x-request-id"] for line in lines)
    run_line = next(line for line in lines if line["logger"] == "teamgraph.runs")
    assert run_line["run_id"] == "run-7" and run_line["message"] == "step s1 failed"
    assert "request_id" not in run_line
    # the loggers are restored when the app stops
    assert logging.getLogger("teamgraph").handlers == []


@tool
def note(text: str) -> str:
    """Write a note in the log."""
    logging.getLogger("teamgraph.tools.registry").warning("noting %s", text)
    return "noted"


async def test_a_line_logged_while_a_run_executes_carries_its_run_id(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool of the run logs: its line names the run, though nothing passed the id along."""
    monkeypatch.setenv("TEAMGRAPH_JSON_LOGS", "true")
    async with serve() as app, client_for(app) as http:
        state = state_of(app)
        scribe = {"name": "scribe", "description": "takes notes", "tools": ["note"]}
        spec = {"name": "noter", "pattern": "single", "members": [scribe]}
        model = ScriptedChatModel(responses=[ToolCall("note", {"text": "hello"}), "done"])
        state.teams["noter"] = Team.from_dict(
            spec, settings=state.settings, model=model, tools=[note]
        )
        user = await make_user(http, "logs@example.com")
        session = await make_session(http, user, team="noter")
        started = await http.post(
            f"/api/v1/sessions/{session['session_id']}/runs",
            json={"input": "note hello"},
            headers=user.headers,
        )
        run_id = started.json()["run_id"]
        async with http.stream(
            "GET", f"/api/v1/runs/{run_id}/events", headers=user.headers
        ) as events:
            read = [line async for line in events.aiter_lines()]
        assert any("run_completed" in line for line in read)
    noted = [line for line in json_lines(capsys.readouterr().err) if "noting" in line["message"]]
    assert [(line["message"], line.get("run_id")) for line in noted] == [("noting hello", run_id)]


async def test_a_workers_job_logs_with_its_run_id(capsys: pytest.CaptureFixture[str]) -> None:
    """In a worker process a run executes as a queue job: the job binds the run's id."""
    worker = Worker(Settings(database_url="postgresql://nobody@127.0.0.1:1/none"))

    async def execute(run_id: str, kind: str) -> None:
        logging.getLogger("teamgraph.runs").warning("executing (%s)", kind)

    worker._run = execute  # type: ignore[method-assign]
    with json_logging():
        await worker._job(None, "run-42", "start")
        logging.getLogger("teamgraph.runs").warning("between jobs")
    lines = json_lines(capsys.readouterr().err)
    assert [(line["message"], line.get("run_id")) for line in lines] == [
        ("executing (start)", "run-42"),
        ("between jobs", None),
    ]


async def test_json_logs_are_off_by_default(
    serve: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    async with serve() as app, client_for(app) as http:
        response = await http.get("/health")
        assert response.headers["x-request-id"]
    assert json_lines(capsys.readouterr().err) == []


def test_serve_freezes_the_start_up_heap_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/serve.db")  # never opened here
    seen: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:  # what uvicorn would be handed
        seen.update(options, frozen=gc.get_freeze_count())

    monkeypatch.setattr(uvicorn, "run", fake_run)
    try:
        serve_app(create_app(settings), "127.0.0.1", 8123, log_level="warning")
    finally:
        gc.unfreeze()
    assert seen["frozen"] > 10_000  # the imported modules: full collections skip them
    assert (seen["host"], seen["port"], seen["log_level"]) == ("127.0.0.1", 8123, "warning")


async def test_the_api_docs_work_without_internet(client: httpx.AsyncClient) -> None:
    """/docs and /redoc load their scripts and styles from the server itself, not a CDN."""
    for page in ("/docs", "/redoc"):
        html = (await client.get(page)).text
        assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", html)
        assert assets and not [a for a in assets if a.startswith(("http:", "https:", "//"))], page
        for asset in assets:
            served = await client.get(asset)
            assert served.status_code == 200 and len(served.content) > 1000, (page, asset)
