"""PostgreSQL LISTEN/NOTIFY between teamgraph processes: a run's new events (for API processes
streaming a run that a worker executes) and control messages (a cancel request for the worker).

A process holds one listening connection (:class:`Notifications`) and fans each notification out
to the waiters of its key (a run id). If the connection drops, it reconnects with backoff and
wakes every waiter, which then re-reads the run store: a missed notification costs a read, never
an event. Senders notify inside the transaction that stores what they announce
(:class:`~teamgraph.storage.run_store.PostgresRunStore`), so a notification never runs ahead of
the data.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from teamgraph.storage.outages import BACKOFF_MAX_S

log = logging.getLogger(__name__)
EVENTS = "tg_events"  # payload "<run_id>:<last stored seq>", then the events' JSON (events_note)
CONTROL = "tg_control"  # payload "<command>:<run_id>", e.g. "cancel:3f2a..."
WAKE = ""  # what waiters get when the connection came back (re-read everything)


class Notifications:
    """One process's listening connection, fanned out to waiters by (channel, key)."""

    def __init__(self, url: str, channels: tuple[str, ...] = (EVENTS, CONTROL)) -> None:
        self.url, self.channels = url, channels
        self._waiters: dict[tuple[str, str], set[asyncio.Queue[str]]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self.reconnects = 0

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self.ready.wait(), 30)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    @contextmanager
    def subscribe(self, channel: str, key: str) -> Iterator[asyncio.Queue[str]]:
        """A queue of the payloads for ``key`` on ``channel`` (and :data:`WAKE` after a
        reconnection), while the block runs."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._waiters[(channel, key)].add(queue)
        try:
            yield queue
        finally:
            waiters = self._waiters[(channel, key)]
            waiters.discard(queue)
            if not waiters:
                del self._waiters[(channel, key)]

    async def _listen(self) -> None:
        import psycopg

        delay = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                async with conn:
                    for channel in self.channels:
                        await conn.execute(f'LISTEN "{channel}"')
                    if self.ready.is_set():  # a reconnection: whatever was missed, re-read
                        self.reconnects += 1
                        self._wake_all()
                    self.ready.set()
                    delay = 0.1
                    async for note in conn.notifies():
                        self._deliver(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: try again
                log.warning("notifications connection lost (%s); reconnecting", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def _deliver(self, channel: str, payload: str) -> None:
        key = payload.partition(":")[0] if channel == EVENTS else payload.partition(":")[2]
        for queue in self._waiters.get((channel, key), ()):
            queue.put_nowait(payload)

    def _wake_all(self) -> None:
        for queues in self._waiters.values():
            for queue in queues:
                queue.put_nowait(WAKE)


CARRIED_BYTES = 7_900  # a notification's payload is under 8,000 bytes (PostgreSQL's default)


def events_note(run_id: str, last_seq: int, encoded: list[str]) -> str:
    """The payload announcing a batch of a run's stored events: ``<run_id>:<last seq>``, then
    the events' JSON, one a line, when they fit in a notification — a listener that has every
    event before them needs no read (:func:`carried`)."""
    head = f"{run_id}:{last_seq}"
    note = "\n".join((head, *encoded))  # JSON holds no raw newline
    return note if encoded and len(note.encode()) <= CARRIED_BYTES else head


def carried(payload: str) -> tuple[int, list[str]]:
    """The last seq an events payload announces (0: unknown, e.g. :data:`WAKE`) and the JSON of
    the events it carries (none: read them from the run store)."""
    head, *encoded = payload.split("\n")
    seq = head.rpartition(":")[2]
    return (int(seq) if seq.isdigit() else 0), encoded


def notify_statement(channel: str, payload: str) -> tuple[Any, dict[str, str]]:
    """A statement that sends ``payload`` on ``channel`` when its transaction commits."""
    from sqlalchemy import text

    return text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
