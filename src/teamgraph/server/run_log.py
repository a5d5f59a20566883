"""The ``events`` table as a run's log: live events are buffered, written in seq order in small
batches (at once for run, step, plan and pause events) and handed to subscribers; readers get the
stored events followed by the live ones, with no gap and no repeat."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Self, cast

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from teamgraph.events import BaseEvent, Event, RunCancelled, event_from_json
from teamgraph.run_context import Emitter, RunContext
from teamgraph.runtime.backend import Backend
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team import Team
from teamgraph.storage.models import EventRow, RunRow, utcnow

log = logging.getLogger(__name__)
FLUSH_INTERVAL = 0.05  # seconds a token or tool event may wait before its batch is written
URGENT = ("run_", "step_", "plan_", "approval_", "clarification_", "resumed")
PAGE = 500  # stored events read per query
ENDINGS = ("run_completed", "run_failed", "run_cancelled")
STOPS = {*ENDINGS, "clarification_requested", "approval_requested"}  # an execution's last events

Subscriber = asyncio.Queue[BaseEvent | None]  # ``None``: this execution of the run has ended


class RunConflict(Exception):
    """The session is busy, the run is paused, superseded or not running (HTTP 409)."""


class LoggedRunner(Runner):
    """A runner that also hands every event to ``sink`` as it is emitted — even the events a
    cancelled run emits after its consumer stopped reading."""

    sink: Callable[[BaseEvent], None]

    def _emitter(
        self, run_id: str, queue: asyncio.Queue[BaseEvent | None], start_seq: int = 0
    ) -> Emitter:
        emitter = super()._emitter(run_id, queue, start_seq)
        to_queue, to_sink = emitter.sink, self.sink

        def both(event: BaseEvent) -> None:
            to_queue(event)
            to_sink(event)

        emitter.sink = both
        return emitter

    async def _finish(self, ctx: RunContext, final: Mapping[str, Any]) -> None:
        await super()._finish(ctx, final)
        self._finished.pop(ctx.run_id, None)  # kept for run(); a served run is read back later

    @classmethod
    def for_team(
        cls,
        team: Team,
        backend: Backend,
        sink: Callable[[BaseEvent], None],
        slots: asyncio.Semaphore | None = None,
    ) -> Self:
        runner = cls(
            team.spec,
            backend,
            settings=team.settings,
            models=team.models,
            model=team.model,
            registry=team.registry,
            user_id=team.user_id,
            slots=slots,
        )
        runner.sink = sink
        return runner


def kind(event: BaseEvent) -> str:
    return cast(Event, event).type


class EventLog:
    """The events of one executing run, from its first emitted event to its last write."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.pending: list[BaseEvent] = []  # emitted, not written yet
        self.writing: list[BaseEvent] = []  # being written
        self.subscribers: set[Subscriber] = set()
        self.dirty, self.urgent = asyncio.Event(), asyncio.Event()
        self.closed = self.finished = False
        self.writer = asyncio.create_task(self._write_loop())

    def add(self, event: BaseEvent) -> None:
        self.pending.append(event)
        self.dirty.set()
        if kind(event).startswith(URGENT):
            self.urgent.set()
        for queue in self.subscribers:
            queue.put_nowait(event)

    def subscribe(self) -> tuple[Subscriber, list[BaseEvent]]:
        """A queue of the events to come, and the emitted ones not stored yet."""
        queue: Subscriber = asyncio.Queue()
        if self.finished:
            queue.put_nowait(None)
        self.subscribers.add(queue)
        return queue, [*self.writing, *self.pending]

    async def close(self) -> None:
        """Write everything left (new events are not accepted any more)."""
        self.closed = True
        self.dirty.set()
        self.urgent.set()
        await asyncio.shield(self.writer)

    def end(self) -> None:
        """End the subscribers' streams (once the run's bookkeeping is done)."""
        self.finished = True
        for queue in self.subscribers:
            queue.put_nowait(None)

    async def _write_loop(self) -> None:
        while self.pending or not self.closed:
            await self.dirty.wait()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.urgent.wait(), FLUSH_INTERVAL)
            self.dirty.clear()
            self.urgent.clear()
            self.writing, self.pending = self.pending, []
            try:
                await append(self.engine, self.writing)
            except Exception:  # the run goes on; its live subscribers still get every event
                log.exception("could not store %d events", len(self.writing))
            self.writing = []


async def append(engine: AsyncEngine, events: Sequence[BaseEvent]) -> None:
    if not events:
        return
    rows = [
        {"run_id": e.run_id, "seq": e.seq, "type": kind(e), "data": e.model_dump_json()}
        for e in events
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(EventRow), rows)


async def stored(engine: AsyncEngine, run_id: str, after_seq: int) -> AsyncIterator[Event]:
    """The stored events of a run with ``seq > after_seq``, in order, a page at a time."""
    while True:
        query = (
            select(EventRow.seq, EventRow.data)
            .where(EventRow.run_id == run_id, EventRow.seq > after_seq)
            .order_by(EventRow.seq)
            .limit(PAGE)
        )
        async with engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        for row in rows:
            yield event_from_json(row.data)
        if len(rows) < PAGE:
            return
        after_seq = rows[-1].seq


async def replay(
    engine: AsyncEngine, run_id: str, after_seq: int, live: EventLog | None
) -> AsyncIterator[Event]:
    """Stored events, then (for a live run) the unstored and the coming ones until the run's
    execution ends. The subscription is taken before reading, duplicates are dropped by seq."""
    queue, recent = live.subscribe() if live is not None else (None, [])
    last = after_seq
    try:
        async for event in stored(engine, run_id, after_seq):
            last = event.seq
            yield event
        for item in recent:
            if item.seq > last:
                last = item.seq
                yield cast(Event, item)
        while queue is not None and (coming := await queue.get()) is not None:
            if coming.seq > last:
                last = coming.seq
                yield cast(Event, coming)
    finally:
        if live is not None and queue is not None:
            live.subscribers.discard(queue)


async def cancel_stored(backend: Backend, row: RunRow, reason: str, after_seq: int = 0) -> None:
    """End a run that is not executing: log ``run_cancelled``, set the status ``cancelled``."""
    seq = max(row.last_seq, after_seq) + 1
    event = RunCancelled(run_id=row.id, seq=seq, path=[row.team_name], reason=reason)
    await append(backend.engine, [event])
    await backend.runs.update(
        row.id, status="cancelled", error="cancelled", last_seq=seq, finished_at=utcnow()
    )
