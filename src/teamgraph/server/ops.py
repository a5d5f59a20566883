"""Operations: ``GET /health`` (liveness), ``GET /ready`` (the database answers), ``GET
/metrics`` (Prometheus) and the wiring of the service's middleware (rate limits, body limit,
CORS, request ids) and JSON logs.

The run manager feeds the run metrics through the app's :class:`Metrics`
(``metrics_of(state)``): ``observe_step(seconds)``, ``add_usage(tokens, usd)``, or simply
``on_event(event)`` for every event (the metrics are a run hook of every served team).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from teamgraph.config import Settings
from teamgraph.events import BaseEvent, StepCompleted, UsageRecorded
from teamgraph.server.deps import State
from teamgraph.server.logging import json_logging, json_logs_enabled
from teamgraph.server.middleware import install_middleware
from teamgraph.server.state import AppState
from teamgraph.storage.outages import RETRY_AFTER_S
from teamgraph.storage.run_store import RunStore

HEALTH_TIMEOUT_S = 5.0
STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """The service's Prometheus metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.requests = Histogram(
            "teamgraph_http_request_duration_seconds",
            "HTTP request latency by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.runs = Gauge(
            "teamgraph_runs", "Runs in the database by status.", ["status"], registry=self.registry
        )
        self.database_up = Gauge(
            "teamgraph_database_up",
            "1 when the last scrape could query the database.",
            registry=self.registry,
        )
        self.steps = Histogram(
            "teamgraph_step_duration_seconds",
            "Workflow step latency.",
            buckets=STEP_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "teamgraph_tokens", "Model tokens used (input + output).", registry=self.registry
        )
        self.cost = Counter("teamgraph_cost_usd", "Model cost in USD.", registry=self.registry)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).observe(seconds)

    def observe_step(self, seconds: float) -> None:
        self.steps.observe(max(0.0, seconds))

    def add_usage(self, tokens: int, usd: float) -> None:
        self.tokens.inc(max(0, tokens))
        self.cost.inc(max(0.0, usd))

    def on_event(self, event: BaseEvent) -> None:
        """A run hook. Step latency from ``step_completed``, tokens and cost from ``usage`` (one
        per model call, so usage counts live and is never counted twice)."""
        if isinstance(event, StepCompleted):
            self.observe_step(event.elapsed_s)
        elif isinstance(event, UsageRecorded):
            usage = event.usage
            self.add_usage(usage.input_tokens + usage.output_tokens, usage.cost_usd)

    async def refresh_runs(self, store: RunStore) -> None:
        """Runs by status, read from the run store (called at scrape time)."""
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                counts = await store.count_by_status()
        except Exception:
            self.database_up.set(0)
            return
        self.database_up.set(1)
        self.runs.clear()
        for status, count in counts.items():
            self.runs.labels(status).set(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def metrics_of(holder: AppState | FastAPI) -> Metrics:
    """The metrics of an app (or of its state, for the run manager)."""
    if isinstance(holder, AppState):
        return holder.metrics
    metrics: Metrics = holder.state.metrics
    return metrics


router = APIRouter(tags=["operations"])


@router.get("/health")
async def health(state: State) -> JSONResponse:
    """Liveness: ``{"status": "ok", "role": …}`` while the process answers — whatever the
    database does (a restart must not get a live process restarted). ``role``: ``api+runs``
    (runs execute here) or ``api`` (API only: workers execute them)."""
    return JSONResponse({"status": "ok", "role": _role(state.settings)})


@router.get(
    "/ready",
    responses={503: {"description": "The database does not answer (with Retry-After)."}},
)
async def ready(state: State) -> JSONResponse:
    """Readiness: ``{"ready": true, "database": "ok", "role": …}`` when the database answers,
    else 503 with ``Retry-After`` and the database's error; it recovers by itself."""
    role = _role(state.settings)
    problem = await database_problem(state.backend.engine)
    if problem is None:
        return JSONResponse({"ready": True, "database": "ok", "role": role})
    body = {"ready": False, "database": problem, "role": role}
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})


async def database_problem(engine: AsyncEngine) -> str | None:
    """``None`` when ``SELECT 1`` answers within :data:`HEALTH_TIMEOUT_S`, else what failed
    (one line: the error's type and first line)."""
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        error = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {error}"[:300].rstrip(": ")
    return None


def _role(settings: Settings) -> str:
    return "api+runs" if settings.execute_runs else "api"


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text."}},
)
async def metrics(request: Request, state: State) -> Response:
    """Prometheus metrics of this process."""
    collected = metrics_of(request.app)
    await collected.refresh_runs(state.backend.runs)
    return Response(collected.render(), media_type=CONTENT_TYPE_LATEST)


def install(app: FastAPI, settings: Settings) -> None:
    """Called by ``create_app``: metrics, middleware, ``/health``, ``/ready`` and ``/metrics``."""
    app.state.metrics = Metrics()
    install_middleware(app, settings, app.state.metrics)
    app.include_router(router)


@contextmanager
def running(app: FastAPI) -> Iterator[None]:
    """Inside the lifespan, once ``app.state.teamgraph`` exists: turns JSON logs on when
    enabled (after uvicorn has configured its loggers, so they stay JSON)."""
    state: AppState = app.state.teamgraph
    logs: Any = json_logging() if json_logs_enabled(state.settings) else nullcontext()
    with logs:
        yield
