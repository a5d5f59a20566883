"""Provider limits: calls at once, requests per minute and tokens per minute per provider or
model (``providers`` setting).

Rates refill continuously, as providers enforce their per-minute limits (in short slices, not
once a minute): ``requests_per_minute: 60`` lets one request through per second, not sixty at
once. Tokens are charged before a call by an estimate of its prompt, and the rest of what the
provider reports after it. On PostgreSQL the rates are shared by every process on the database
(:mod:`teamgraph.storage.rates`): two workers at 30 requests a minute make 30 between them.
Elsewhere they are leaky buckets of the process (``aiolimiter``). ``max_concurrency`` is always
per process.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from typing import Any, Protocol, TypeVar

from aiolimiter import AsyncLimiter
from langchain_core.messages import AIMessage, BaseMessage

from teamgraph.config import ProviderSettings
from teamgraph.storage.rates import SharedRates

T = TypeVar("T")
TOKEN_WINDOW_S = 10.0  # the token bucket holds 10 s of the per-minute rate
CHARS_PER_TOKEN = 4


class Bucket(Protocol):
    """A rate: ``acquire`` waits for units; ``charge`` takes them without waiting (the calls
    after it wait instead)."""

    max_units: float

    async def acquire(self, units: float) -> None: ...

    async def charge(self, units: float) -> None: ...


class ProviderLimits:
    """One provider's (or model's) limits. Calls pass :meth:`through` it."""

    def __init__(
        self, options: ProviderSettings, rates: SharedRates | None = None, key: str = ""
    ) -> None:
        """``rates``: share the rates with every process on that database, under ``key``."""
        self.slots = asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
        self.requests = _bucket(rates, f"{key}:requests", options.requests_per_minute, 1.0)
        self.tokens = _bucket(rates, f"{key}:tokens", options.tokens_per_minute, TOKEN_WINDOW_S)

    async def through(self, call: Callable[[], Awaitable[T]], messages: Sequence[BaseMessage]) -> T:
        """``call()`` once the limits admit it; its reported tokens charged afterwards."""
        estimate = sum(len(_text(m)) for m in messages) // CHARS_PER_TOKEN + 1
        if self.requests is not None:
            await self.requests.acquire(1)
        if self.tokens is not None:
            await self.tokens.acquire(min(estimate, self.tokens.max_units))
        async with self.slots or nullcontext():
            result = await call()
        if self.tokens is not None:
            debt = min(_reported_tokens(result) - estimate, self.tokens.max_units)
            if debt > 0:
                await self.tokens.charge(debt)
        return result


def _window(per_minute: int, window_s: float) -> float:
    """A bucket holds ``window_s`` seconds of the rate (longer when that is under one unit)."""
    return max(window_s, 60.0 / per_minute)


class LocalBucket:
    """A rate of this process: a leaky bucket (``aiolimiter``)."""

    def __init__(self, per_minute: int, window_s: float) -> None:
        window = _window(per_minute, window_s)
        self.limiter = AsyncLimiter(per_minute * window / 60.0, window)
        self.max_units = self.limiter.max_rate
        self._debts: set[asyncio.Task[None]] = set()

    async def acquire(self, units: float) -> None:
        await self.limiter.acquire(units)

    async def charge(self, units: float) -> None:
        if self.limiter.has_capacity(units):
            await self.limiter.acquire(units)  # returns at once
            return
        task = asyncio.get_running_loop().create_task(self.limiter.acquire(units))
        self._debts.add(task)
        task.add_done_callback(self._debts.discard)


class SharedBucket:
    """A rate of every process on the database (GCRA in ``rate_limits``)."""

    def __init__(self, rates: SharedRates, key: str, per_minute: int, window_s: float) -> None:
        self.rates, self.key = rates, key
        self.interval = 60.0 / per_minute  # seconds of the rate one unit takes
        window = _window(per_minute, window_s)
        self.tolerance = window - self.interval
        self.max_units = per_minute * window / 60.0

    async def acquire(self, units: float) -> None:
        wait = await self.rates.reserve(self.key, units * self.interval, self.tolerance)
        if wait > 0:
            await asyncio.sleep(wait)

    async def charge(self, units: float) -> None:
        await self.rates.reserve(self.key, units * self.interval, self.tolerance)


def _reported_tokens(result: Any) -> int:
    reply = result.get("raw") if isinstance(result, dict) else result
    usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
    return int(usage["total_tokens"]) if usage else 0


def _text(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else str(content)


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, ProviderLimits]] = (
    weakref.WeakKeyDictionary()
)


def limits_for(
    model: str, options: ProviderSettings, rates: SharedRates | None = None
) -> ProviderLimits | None:
    """The process's limits for ``model`` with these limits (``None`` when none is set); its
    rates are shared through ``rates`` when given. Gates belong to an event loop, as their
    locks do."""
    limits = (options.max_concurrency, options.requests_per_minute, options.tokens_per_minute)
    if not any(limits):
        return None
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    key = (model, *limits, id(rates))
    if key not in gates:
        gates[key] = ProviderLimits(options, rates, model)
    return gates[key]


def _bucket(
    rates: SharedRates | None, key: str, per_minute: int | None, window_s: float
) -> Bucket | None:
    if per_minute is None:
        return None
    if rates is None:
        return LocalBucket(per_minute, window_s)
    return SharedBucket(rates, f"{key}:{per_minute}", per_minute, window_s)
