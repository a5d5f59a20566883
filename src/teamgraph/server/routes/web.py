"""The web workspace: ``/`` serves its page, ``/ui/…`` its modules, under a strict CSP."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

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


class _SecuredFiles(StaticFiles):
    """The workspace's modules, with the page's security headers, revalidated on every load."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update({**SECURITY_HEADERS, "Cache-Control": "no-cache"})
        return response


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/ui", _SecuredFiles(directory=STATIC_DIR), name="ui")
