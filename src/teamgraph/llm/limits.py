"""Provider limits, shared by every run of a process: calls at once, requests per minute and
tokens per minute per provider or model (``providers`` setting).

Rates are leaky buckets (``aiolimiter``) that refill continuously, as providers enforce their
per-minute limits (in short slices, not once a minute): ``requests_per_minute: 60`` lets one
request through per second, not sixty at once. Tokens are charged before a call by an estimate
of its prompt, and the rest of what the provider reports after it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

from aiolimiter import AsyncLimiter
from langchain_core.messages import AIMessage, BaseMessage

from teamgraph.config import ProviderSettings

T = TypeVar("T")
TOKEN_WINDOW_S = 10.0  # the token bucket holds 10 s of the per-minute rate
CHARS_PER_TOKEN = 4


class Gate:
    """One provider's (or model's) limits. Calls pass :meth:`through` it."""

    def __init__(self, options: ProviderSettings) -> None:
        self.slots = asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
        self.requests = _bucket(options.requests_per_minute, 1.0)
        self.tokens = _bucket(options.tokens_per_minute, TOKEN_WINDOW_S)
        self._debts: set[asyncio.Task[None]] = set()

    async def through(self, call: Callable[[], Awaitable[T]], messages: Sequence[BaseMessage]) -> T:
        """``call()`` once the limits admit it; its reported tokens charged afterwards."""
        estimate = sum(len(_text(m)) for m in messages) // CHARS_PER_TOKEN + 1
        if self.requests is not None:
            await self.requests.acquire()
        if self.tokens is not None:
            await self.tokens.acquire(min(estimate, self.tokens.max_rate))
        async with self.slots or nullcontext():
            result = await call()
        if self.tokens is not None:
            await self._charge(self.tokens, _reported_tokens(result) - estimate)
        return result

    async def _charge(self, bucket: AsyncLimiter, tokens: int) -> None:
        """Take what a call used beyond its estimate from the bucket, without holding the call
        up: at once when the bucket has room, else later calls wait for it."""
        amount = min(tokens, bucket.max_rate)
        if amount <= 0:
            return
        if bucket.has_capacity(amount):
            await bucket.acquire(amount)  # returns at once
            return
        task = asyncio.get_running_loop().create_task(bucket.acquire(amount))
        self._debts.add(task)
        task.add_done_callback(self._debts.discard)


def _bucket(per_minute: int | None, window_s: float) -> AsyncLimiter | None:
    """A bucket of ``window_s`` seconds of the rate (longer when that is under one unit)."""
    if per_minute is None:
        return None
    window = max(window_s, 60.0 / per_minute)
    return AsyncLimiter(per_minute * window / 60.0, window)


def _reported_tokens(result: Any) -> int:
    reply = result.get("raw") if isinstance(result, dict) else result
    usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
    return int(usage["total_tokens"]) if usage else 0


def _text(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else str(content)


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, Gate]] = (
    weakref.WeakKeyDictionary()
)


def gate(model: str, options: ProviderSettings) -> Gate | None:
    """The process's gate for ``model`` with these limits (``None`` when none is set). Gates
    belong to an event loop, as their locks do."""
    limits = (options.max_concurrency, options.requests_per_minute, options.tokens_per_minute)
    if not any(limits):
        return None
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    key = (model, *limits)
    if key not in gates:
        gates[key] = Gate(options)
    return gates[key]
