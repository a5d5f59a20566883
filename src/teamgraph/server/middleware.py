"""The service's middleware, outermost first: request context (request id, latency metric,
access log) → CORS → rate limits → body size limit → the app. All are pure ASGI, so SSE streams
pass through unbuffered."""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import TYPE_CHECKING

from fastapi import FastAPI, HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from teamgraph.config import Settings
from teamgraph.server.logging import request_id_var
from teamgraph.server.ratelimit import RateLimitMiddleware

if TYPE_CHECKING:
    from teamgraph.server.ops import Metrics

access_log = logging.getLogger("teamgraph.server.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, detail=f"Request body too large: the limit is {limit} bytes")


UPLOAD_PATHS = frozenset({"/api/v1/rag/upload"})


class BodyLimitMiddleware:
    """413 for bodies over ``limit`` bytes: at once when ``Content-Length`` says so, otherwise
    as soon as the bytes read pass it (chunked or lying clients)."""

    def __init__(self, app: ASGIApp, limit: int, uploads: int | None = None) -> None:
        self.app = app
        self.limit = limit
        self.uploads = uploads or limit  # for UPLOAD_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in UPLOAD_PATHS and self.uploads != self.limit:
            await BodyLimitMiddleware(self.app, self.uploads)(scope, receive, send)
            return
        declared = _header(scope, b"content-length")  # not a number: only the count decides
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(self.limit, scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)  # FastAPI turns it into the 413 response
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await _too_large(self.limit, scope, receive, send)


async def _too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    error = BodyTooLarge(limit)
    response = JSONResponse({"detail": error.detail}, status_code=413)
    await response(scope, receive, send)


class RequestContextMiddleware:
    """Request id (``X-Request-ID`` in, or generated; echoed back), the latency histogram by
    route template, and one access log line on ``teamgraph.server.access``."""

    def __init__(self, app: ASGIApp, metrics: Metrics, fastapi_app: FastAPI) -> None:
        self.app = app
        self.metrics = metrics
        self.fastapi_app = fastapi_app
        self._templates: list[tuple[str, re.Pattern[str]]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0] != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            route = self._route(scope)
            self.metrics.observe_request(scope["method"], route, status, elapsed)
            access_log.info(
                "%s %s %d %.1fms",
                scope["method"],
                scope["path"],
                status,
                elapsed * 1000,
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                },
            )
            request_id_var.reset(token)

    def _route(self, scope: Scope) -> str:
        """The route template (``/api/v1/runs/{run_id}/events``), never the raw path, so the
        metric's labels stay few. Requests answered before routing (429, 413, CORS preflight)
        are matched against the OpenAPI paths."""
        path = getattr(scope.get("route"), "path", None)
        if isinstance(path, str):
            return path
        if self._templates is None:
            try:
                paths = sorted(self.fastapi_app.openapi()["paths"], key=lambda p: p.count("{"))
            except Exception:  # a broken schema must not break requests
                paths = []
            self._templates = [(p, compile_path(p)[0]) for p in paths]
        return next((t for t, rx in self._templates if rx.match(scope["path"])), "unmatched")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1")).strip()
    return None


def install_middleware(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    # add_middleware puts each new one outside the previous ones: add innermost first
    app.add_middleware(
        BodyLimitMiddleware, limit=settings.max_body_bytes, uploads=settings.max_upload_bytes
    )
    app.add_middleware(
        RateLimitMiddleware,
        limits=settings.rate_limits,
        authenticator=lambda: app.state.teamgraph.authenticator,
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_credentials=True,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=[  # what browser clients read: run ids, waits, MCP's session
                "X-Request-ID",
                "Retry-After",
                "Content-Type",
                "Content-Location",
                "Mcp-Session-Id",
            ],
        )
    app.add_middleware(RequestContextMiddleware, metrics=metrics, fastapi_app=app)
