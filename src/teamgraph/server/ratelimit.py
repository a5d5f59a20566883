"""Rate limits by route group, per user (whoever the request's credential authenticates: a
token, an API key or the log-in cookie, read by :mod:`teamgraph.server.credentials` as the routes
read it) and per client IP.

An in-process sliding-window log: every key keeps the times of its last ``N`` admitted requests, so
"N per period" holds over *any* window of that length. Limits live in one process: with several
workers each enforces its own (put a shared limiter in front for a hard global cap). The client IP
is the ASGI ``client`` address: the connection's own unless ``TEAMGRAPH_TRUSTED_PROXIES`` lists
the reverse proxy in front (then uvicorn takes it from that proxy's ``X-Forwarded-For``; no
other sender's header is believed).
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from teamgraph.errors import UsageError
from teamgraph.server.credentials import Authenticator, presented

_PERIODS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}
_LIMIT = re.compile(r"^\s*(\d+)\s*/\s*(second|minute|hour|day)s?\s*$")
_SESSION_RUNS = re.compile(r"^/api/v1/sessions/[^/]+/runs$")
_RUN_EVENTS = re.compile(r"^/api/v1/runs/[^/]+/events$")


@dataclass(frozen=True)
class Limit:
    count: int
    period: float  # seconds
    text: str

    @classmethod
    def parse(cls, text: str) -> Limit:
        """``"30/minute"`` → 30 per 60 s (``second``, ``minute``, ``hour`` or ``day``)."""
        match = _LIMIT.match(text)
        if match is None or int(match.group(1)) < 1:
            raise UsageError(f"rate limit {text!r}: write N/second, N/minute or N/hour (N ≥ 1)")
        return cls(int(match.group(1)), _PERIODS[match.group(2)], text.strip())


def parse_limits(limits: Mapping[str, str]) -> dict[str, Limit]:
    return {group: Limit.parse(text) for group, text in limits.items()}


def route_group(method: str, path: str) -> str | None:
    """The rate-limit group of a request, or ``None`` when it is not limited."""
    path = path.rstrip("/") or "/"
    if path.endswith("/stream") or (method == "GET" and _RUN_EVENTS.match(path)):
        return "stream"
    if method != "POST":
        return None
    if path == "/api/v1/auth/register":
        return "register"
    if path in ("/api/v1/auth/login", "/api/v1/auth/reset-password"):
        return "login"  # password guesses, whichever door they knock on
    if (
        path.startswith(("/api/v1/chatbot/", "/api/chat/"))
        or path in ("/api/chat", "/v1/chat/completions")
        or _SESSION_RUNS.match(path)
    ):
        return "chat"
    return None


class SlidingWindowLimiter:
    """Admits a request when every one of its keys has had fewer than ``limit.count`` admitted
    requests in the last ``limit.period`` seconds. Not thread-safe (one event loop)."""

    SWEEP_EVERY = 4096  # forget idle keys now and then, so memory follows the active clients

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._hits: dict[str, tuple[deque[float], float]] = {}  # key → (times, period)
        self._calls = 0

    def hit(self, keys: Iterable[str], limit: Limit) -> float:
        """Record one request under every key and return 0, or, when a key is over its limit,
        record nothing and return the seconds until it would be admitted."""
        now = self.clock()
        self._calls += 1
        if self._calls % self.SWEEP_EVERY == 0:
            self._sweep(now)
        windows = [self._window(key, limit, now) for key in keys]
        wait = self._wait(windows, limit, now)
        if wait > 0:
            return wait
        for window in windows:
            window.append(now)
        return 0.0

    def wait(self, keys: Iterable[str], limit: Limit) -> float:
        """The seconds until a request under ``keys`` would be admitted (0: now); records
        nothing."""
        now = self.clock()
        return self._wait([self._window(key, limit, now) for key in keys], limit, now)

    @staticmethod
    def _wait(windows: list[deque[float]], limit: Limit, now: float) -> float:
        return max(
            (w[0] + limit.period - now for w in windows if len(w) >= limit.count), default=0.0
        )

    def _window(self, key: str, limit: Limit, now: float) -> deque[float]:
        entry = self._hits.get(key)
        if entry is None:
            entry = self._hits[key] = (deque(maxlen=limit.count), limit.period)
        window = entry[0]
        while window and window[0] <= now - limit.period:
            window.popleft()
        return window

    def _sweep(self, now: float) -> None:
        idle = [k for k, (w, period) in self._hits.items() if not w or w[-1] <= now - period]
        for key in idle:
            del self._hits[key]


class RateLimitMiddleware:
    """429 with ``Retry-After`` when a request's group is over its limit for the client IP or,
    with a valid credential, for its user. ``authenticator``: the app's (it exists once the app
    has started)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: Mapping[str, str],
        authenticator: Callable[[], Authenticator],
        limiter: SlidingWindowLimiter | None = None,
    ) -> None:
        self.app = app
        self.limits = parse_limits(limits)
        self.authenticator = authenticator
        self.limiter = limiter or SlidingWindowLimiter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        group = route_group(scope["method"], scope["path"]) if scope["type"] == "http" else None
        limit = self.limits.get(group) if group else None
        if group is None or limit is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = f"{group}|ip|{client[0] if client else 'unknown'}"
        wait = self.limiter.wait([address], limit)  # an address over its limit: no user lookup
        if wait <= 0:
            user = await self._user(scope)
            keys = [address] if user is None else [address, f"{group}|user|{user}"]
            wait = self.limiter.hit(keys, limit)
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"detail": f"Rate limit exceeded: {group} {limit.text}"},
            status_code=429,
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
        await response(scope, receive, send)

    async def _user(self, scope: Scope) -> str | None:
        """The user the request's credential authenticates (``None``: anonymous, or it could
        not be read now — the route will say why)."""
        found = presented(scope)
        if found is None:
            return None
        try:
            claims = await self.authenticator().claims(found.token)
        except Exception:  # the database is unreachable: the address still counts
            return None
        return claims.user_id if claims else None
