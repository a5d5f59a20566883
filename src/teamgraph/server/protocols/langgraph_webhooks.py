"""The Agent Protocol's ``webhook``: a run started with ``webhook=<url>`` POSTs the run to the
URL once it ends (or pauses for a human) — the run as ``runs.get`` returns it, with the thread's
``values`` — signed, and retried when the receiver cannot take it.

**Signature.** ``X-Teamgraph-Signature: t=<unix time>,v1=<hex>``: the HMAC-SHA256, keyed with
``TEAMGRAPH_WEBHOOK_SECRET``, of ``<unix time>.<body>`` (:func:`signature`; a receiver recomputes
it and rejects old times). ``X-Teamgraph-Delivery`` is the same on every attempt of one call
(a receiver drops repeats by it). A server without the secret refuses runs with a webhook.

**Retries.** A connection error, a timeout, 408, 429 or 5xx is tried again after each of
:data:`RETRY_DELAYS`; any other answer ends the delivery. Deliveries are made by the process
that served the request, in the background: one still waiting when that process stops is lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from teamgraph.errors import UsageError

RETRY_DELAYS: tuple[float, ...] = (1.0, 5.0, 30.0)  # seconds before each attempt after the first
TIMEOUT_S = 10.0
SIGNATURE = "X-Teamgraph-Signature"
DELIVERY = "X-Teamgraph-Delivery"
RETRIED = {408, 429}
log = logging.getLogger(__name__)
_deliveries: set[asyncio.Task[bool]] = set()  # kept until done (asyncio holds tasks weakly)


def checked(url: str, secret: str) -> str:
    """``url`` if the server can call it: http(s) with a host, and a secret to sign with."""
    if not secret:
        raise UsageError(
            "webhook: this server sends no webhooks (TEAMGRAPH_WEBHOOK_SECRET is unset)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"webhook: {url[:200]!r} is not an http(s) URL")
    return url


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The value of :data:`SIGNATURE` for ``body`` sent at ``timestamp``."""
    signed = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def schedule(
    url: str, secret: str, ended: Awaitable[None], payload: Callable[[], Awaitable[dict[str, Any]]]
) -> None:
    """Once ``ended`` is done, POST ``payload()`` to ``url`` (in the background)."""

    async def run() -> bool:
        await ended
        return await deliver(url, secret, await payload())

    task = asyncio.get_running_loop().create_task(run())
    _deliveries.add(task)
    task.add_done_callback(_deliveries.discard)


async def deliver(url: str, secret: str, payload: dict[str, Any]) -> bool:
    """POST ``payload`` to ``url``, signed, with retries; whether the receiver took it."""
    body = json.dumps(payload, ensure_ascii=False, default=str).encode()
    delivery = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as client:
        for attempt, delay in enumerate((0.0, *RETRY_DELAYS), start=1):
            await asyncio.sleep(delay)
            headers = {
                "Content-Type": "application/json",
                SIGNATURE: signature(secret, int(time.time()), body),
                DELIVERY: delivery,
            }
            try:
                answer = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError as error:
                log.warning("webhook %s attempt %d: %r", delivery, attempt, error)
                continue
            if answer.status_code < 400:
                return True
            if answer.status_code not in RETRIED and answer.status_code < 500:
                log.warning("webhook %s refused: %d", delivery, answer.status_code)
                return False
            log.warning("webhook %s attempt %d: %d", delivery, attempt, answer.status_code)
    return False
