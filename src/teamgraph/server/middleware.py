"""The service's middleware, outermost first: request context (request id, latency metric,
access log) → CORS → rate limits → body size limit → JSON limits → the app. All are pure ASGI,
so SSE streams pass through unbuffered."""

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
        if (
            declared is not None
            and declared.isascii()
            and declared.isdigit()
            and int(declared) > self.limit
        ):
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


class JsonLimitMiddleware:
    """Every JSON body (``application/json``, ``application/*+json``, or no content type, as
    FastAPI parses it) is checked before any route reads it: 400 when it is not UTF-8 or is
    nested deeper than ``max_depth`` arrays and objects — the depth no route needs and a
    recursive parser, encoder or validator could choke on. The body is read whole here (its
    size is bounded by the body limit outside); the error is raised inside the app, so each
    dialect writes it in its own error shape."""

    def __init__(self, app: ASGIApp, max_depth: int) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _json_content(_header(scope, b"content-type")):
            await self.app(scope, receive, send)
            return
        checked = False

        async def checking_receive() -> Message:
            nonlocal checked
            if checked:
                return await receive()
            checked = True
            message = await receive()
            chunks = [message.get("body", b"")]
            while message["type"] == "http.request" and message.get("more_body", False):
                message = await receive()
                chunks.append(message.get("body", b""))
            if message["type"] != "http.request":
                return message  # the client went away
            data = b"".join(chunks)
            json_problem(data, self.max_depth)
            return {"type": "http.request", "body": data, "more_body": False}

        await self.app(scope, checking_receive, send)


def _json_content(content_type: str | None) -> bool:
    if not content_type:
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # depth does not care which kind of bracket


def json_problem(data: bytes, max_depth: int) -> None:
    """Raise a 400 naming what is wrong with the JSON text ``data`` if it is not UTF-8 or is
    nested deeper than ``max_depth`` (other syntax errors are the parser's to report)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(
            400, detail=f"Request body is not valid UTF-8 (byte {exc.start}): JSON must be UTF-8"
        ) from None
    if json_depth(data, max_depth) > max_depth:
        raise HTTPException(
            400, detail=f"Request body is JSON nested deeper than {max_depth} levels (the limit)"
        )


def json_depth(data: bytes, limit: int) -> int:
    """How deep the JSON text's arrays and objects nest, counted up to ``limit + 1``. Strings
    are dropped, then each pass removes the innermost pairs (one level per pass, in C);
    brackets that do not pair up (not JSON) are counted one by one."""
    brackets = _STRING.sub(b"", data).translate(_ONE_KIND, _NOT_BRACKETS)
    if b"[" * (limit + 1) in brackets:  # the common deep body: one run of openings
        return limit + 1
    depth = 0
    while brackets and depth <= limit:
        fewer = brackets.replace(b"[]", b"")
        if fewer == brackets:  # unpaired: the deepest opening run counts
            return depth + _open_run(brackets)
        brackets, depth = fewer, depth + 1
    return depth


def _open_run(brackets: bytes) -> int:
    level = deepest = 0
    for byte in brackets:
        level += 1 if byte == ord("[") else -1
        deepest = max(deepest, level)
    return deepest


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
    app.add_middleware(JsonLimitMiddleware, max_depth=settings.max_json_depth)
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
