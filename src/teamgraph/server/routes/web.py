"""The web workspace: ``/`` serves its page, ``/ui/…`` its modules, under a strict CSP."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from teamgraph.ui import STATIC_DIR

# Nothing inline, nothing from elsewhere: a string from a run can never become a script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers=SECURITY_HEADERS)


class _Secured:
    """Adds the security headers (and revalidation) to every static file."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                message["headers"] = [*headers, *extra, (b"cache-control", b"no-cache")]
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/ui", _Secured(StaticFiles(directory=STATIC_DIR)), name="ui")
