"""Errors as JSON with a clear message: validation → 422 naming the fields; teamgraph usage
errors → 400; nothing raw leaks."""

from __future__ import annotations

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from teamgraph.errors import RunConflict, RunNotFound, UsageError


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation(_: Request, exc: RequestValidationError) -> JSONResponse:
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
