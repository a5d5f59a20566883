"""Log-in by cookie for same-origin browser clients: the token in an HttpOnly cookie, and the
rule that keeps it CSRF-safe.

A request that authenticates with the cookie (no ``Authorization`` header) and may change
something (any method but GET/HEAD/OPTIONS) is taken only when the browser says it comes from
the same origin (``Sec-Fetch-Site: same-origin``, or an ``Origin`` equal to the host it was
sent to or listed in ``TEAMGRAPH_CORS_ORIGINS``), or when it carries the ``X-CSRF-Token``
header equal to the readable ``teamgraph_csrf`` cookie (double submit). The cookie itself is
``SameSite=Lax``, so other sites' pages never send it on a POST."""

from __future__ import annotations

import hmac
import secrets
from datetime import datetime
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, Response, status

TOKEN_COOKIE = "teamgraph_token"
CSRF_COOKIE = "teamgraph_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def set_login_cookies(response: Response, request: Request, token: str, expires: datetime) -> None:
    """The token (HttpOnly) and a CSRF value the page's script may read (double submit)."""
    secure = request.url.scheme == "https"
    common = {"expires": expires, "path": "/", "secure": secure, "samesite": "lax"}
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, **common)  # type: ignore[arg-type]
    response.set_cookie(CSRF_COOKIE, secrets.token_urlsafe(24), **common)  # type: ignore[arg-type]


def clear_login_cookies(response: Response) -> None:
    for name in (TOKEN_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/")


def check_csrf(request: Request, trusted_origins: list[str]) -> None:
    """Refuse (403) a cookie-authenticated request that may change something unless it is
    shown to come from the same origin or from a trusted one."""
    if request.method in SAFE_METHODS:
        return
    site = request.headers.get("sec-fetch-site")
    if site in ("same-origin", "none"):
        return
    origin = request.headers.get("origin")
    if origin and origin != "null" and _trusted(origin, request, trusted_origins):
        return
    sent = request.headers.get(CSRF_HEADER, "")
    kept = request.cookies.get(CSRF_COOKIE, "")
    if sent and kept and hmac.compare_digest(sent, kept):
        return
    raise HTTPException(
        status.HTTP_403_FORBIDDEN,
        detail=(
            "Cross-site request refused: a request authenticated by the log-in cookie must "
            f"come from the same origin or carry the {CSRF_HEADER} header "
            f"(the value of the {CSRF_COOKIE} cookie)"
        ),
    )


def _trusted(origin: str, request: Request, trusted_origins: list[str]) -> bool:
    if origin.rstrip("/") in (o.rstrip("/") for o in trusted_origins):
        return True
    host = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    return urlsplit(origin).netloc == host
