"""Errors as JSON with a clear message: validation → 422 naming the fields; teamgraph usage
errors → 400; nothing raw leaks. Under ``/v1/`` (the OpenAI-compatible routes) every error has
OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, as its SDKs expect."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from teamgraph.errors import RunConflict, RunNotFound, UsageError

OPENAI_PREFIX = "/v1/"
_OPENAI_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


class OpenAIError(HTTPException):
    """An error of the OpenAI-compatible routes: its ``code`` and ``param`` as OpenAI names
    them (e.g. ``model_not_found``, ``model``)."""

    def __init__(
        self, status_code: int, message: str, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(status_code, detail=message)
        self.code = code
        self.param = param


def openai_error(
    status_code: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    kind, default_code = _OPENAI_TYPES.get(
        status_code, ("server_error" if status_code >= 500 else "invalid_request_error", None)
    )
    body: dict[str, Any] = {
        "message": message,
        "type": kind,
        "param": param,
        "code": code or default_code,
    }
    return JSONResponse({"error": body}, status_code=status_code)


def _openai(request: Request) -> bool:
    return request.url.path.startswith(OPENAI_PREFIX)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)  # raised by routing (404, 405) too
    async def http(request: Request, exc: StarletteHTTPException) -> Response:
        if not _openai(request):
            return await http_exception_handler(request, exc)
        code, param = getattr(exc, "code", None), getattr(exc, "param", None)
        return openai_error(exc.status_code, str(exc.detail), code, param)

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        if _openai(request):
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first["loc"] if p != "body") or None
            message = f"{param}: {first['msg']}" if param else str(first["msg"])
            return openai_error(400, message, "invalid_value", param)
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

    @app.exception_handler(RunNotFound)
    async def not_found(_: Request, exc: RunNotFound) -> JSONResponse:
        return JSONResponse({"detail": "Run not found"}, status_code=status.HTTP_404_NOT_FOUND)

    @app.exception_handler(RunConflict)
    async def conflict(_: Request, exc: RunConflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_409_CONFLICT)

    @app.exception_handler(UsageError)
    async def usage(_: Request, exc: UsageError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_400_BAD_REQUEST)
