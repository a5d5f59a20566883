"""Errors as JSON with a clear message: validation → 422 naming the fields; teamgraph usage
errors → 400; a run's conflict with its state → 409; the database unreachable (a restart, dropped
connections, a full pool, SQLite locked past its timeout) → 503 with ``Retry-After``; nothing raw
leaks.

A dialect whose clients expect errors in a shape of their own registers an :class:`ErrorShape`
for its path prefix (the OpenAI-compatible routes do: ``{"error": {...}}`` under ``/v1/``);
every error under that prefix — routing's 404 and 405, validation, the routes' own — is then
written in that shape, and :class:`ShapedErrors` reshapes the errors answered before the app
(the body limit's 413, the rate limits' 429, a 503) the same way."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from teamgraph.errors import DatabaseUnavailable, RunConflict, RunNotFound, UsageError
from teamgraph.storage.outages import RETRY_AFTER_S, is_outage

# (status, message, code, param) → the response; ``code`` and ``param`` as the dialect names them
Shaper = Callable[[int, str, str | None, str | None], Response]


@dataclass(frozen=True)
class ErrorShape:
    """Errors of the requests under ``prefix``, written by ``respond``."""

    prefix: str
    respond: Shaper


def install_error_handlers(app: FastAPI, shapes: Sequence[ErrorShape] = ()) -> None:
    handlers = _Handlers(shapes)
    app.add_exception_handler(StarletteHTTPException, handlers.http)  # routing's 404, 405 too
    app.add_exception_handler(RequestValidationError, handlers.validation)
    app.add_exception_handler(RunNotFound, handlers.not_found)
    app.add_exception_handler(RunConflict, handlers.conflict)
    app.add_exception_handler(UsageError, handlers.usage)
    for kind in _database_errors():
        app.add_exception_handler(kind, handlers.database)


def _database_errors() -> Iterator[type[Exception]]:
    """The error classes an outage can come as (the drivers not installed are skipped)."""
    import sqlalchemy.exc

    yield DatabaseUnavailable
    yield sqlite3.OperationalError
    yield sqlalchemy.exc.DBAPIError
    yield sqlalchemy.exc.TimeoutError
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        return
    yield psycopg.Error
    yield psycopg_pool.PoolTimeout


@dataclass(frozen=True)
class _Handlers:
    shapes: Sequence[ErrorShape]

    def shape_of(self, request: Request) -> Shaper | None:
        path = request.url.path
        return next((s.respond for s in self.shapes if path.startswith(s.prefix)), None)

    def plain(self, request: Request, status_code: int, detail: str) -> Response:
        shaped = self.shape_of(request)
        if shaped is not None:
            return shaped(status_code, detail, None, None)
        return JSONResponse({"detail": detail}, status_code=status_code)

    async def http(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        shaped = self.shape_of(request)
        if shaped is None:
            return await http_exception_handler(request, exc)
        code, param = getattr(exc, "code", None), getattr(exc, "param", None)
        return shaped(exc.status_code, str(exc.detail), code, param)

    async def validation(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        shaped = self.shape_of(request)
        if shaped is not None:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first["loc"] if p != "body") or None
            message = f"{param}: {first['msg']}" if param else str(first["msg"])
            return shaped(400, message, "invalid_value", param)
        errors = [
            {
                "field": ".".join(str(p) for p in e["loc"] if p != "body") or "body",
                "message": str(e["msg"]).removeprefix("Value error, "),
            }
            for e in exc.errors()
        ]
        return JSONResponse(
            {"detail": "Validation error", "errors": errors},
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.plain(request, status.HTTP_404_NOT_FOUND, "Run not found")

    async def conflict(self, request: Request, exc: Exception) -> Response:
        return self.plain(request, status.HTTP_409_CONFLICT, str(exc))

    async def usage(self, request: Request, exc: Exception) -> Response:
        return self.plain(request, status.HTTP_400_BAD_REQUEST, str(exc))

    async def database(self, request: Request, exc: Exception) -> Response:
        """503 with ``Retry-After`` when the database is unreachable; any other database error
        is the server's own (500, logged)."""
        if not is_outage(exc):
            raise exc
        detail = "the database is unreachable for now; try again shortly"
        response = self.plain(request, status.HTTP_503_SERVICE_UNAVAILABLE, detail)
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response


class ShapedErrors:
    """Middleware (outside the others) that writes, under a shape's prefix, every error
    response still in the plain ``{"detail": …}`` form in that shape, keeping its status and
    headers (``Retry-After``, ``WWW-Authenticate``, CORS). Only those errors' bodies are
    buffered; everything else passes through."""

    def __init__(self, app: ASGIApp, shapes: Sequence[ErrorShape]) -> None:
        self.app = app
        self.shapes = shapes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shape = None
        if scope["type"] == "http":
            shape = next((s for s in self.shapes if scope["path"].startswith(s.prefix)), None)
        if shape is None:
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        body = b""

        async def reshaping_send(message: Message) -> None:
            nonlocal held, body
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                await _reshaped(shape, held, body, scope, receive, send)

        await self.app(scope, receive, reshaping_send)


async def _reshaped(
    shape: ErrorShape, start: Message, body: bytes, scope: Scope, receive: Receive, send: Send
) -> None:
    """The held error response, in ``shape`` unless it is in it already (or not JSON)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or "detail" not in data:
        await send(start)
        await send({"type": "http.response.body", "body": body})
        return
    detail = data["detail"]
    response = shape.respond(
        start["status"], detail if isinstance(detail, str) else json.dumps(detail), None, None
    )
    kept = [(k, v) for k, v in start["headers"] if k not in (b"content-length", b"content-type")]
    response.raw_headers[:] = [
        *kept,
        *((k, v) for k, v in response.raw_headers if k in (b"content-length", b"content-type")),
    ]
    await response(scope, receive, send)
