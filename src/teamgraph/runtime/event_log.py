"""A live run's events: kept in memory and handed to subscribers as they are emitted, and stored
through the run store in the background, in seq order, batched across runs; readers get the
stored events followed by the live ones, with no gap and no repeat."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass
from typing import Any, cast

from teamgraph.events import BaseEvent, Event, event_from_json
from teamgraph.faults import point
from teamgraph.status import END_EVENTS, EXECUTING, PAUSE_EVENTS
from teamgraph.storage.direct import Statement
from teamgraph.storage.notify import EVENTS, Notifications, carried
from teamgraph.storage.outages import BACKOFF_MAX_S, is_outage, outage_met, until_reachable
from teamgraph.storage.run_store import PAGE, RunStore

log = logging.getLogger(__name__)
FLUSH_INTERVAL = 0.05  # seconds an event may wait before its batch is written
BATCH = 100  # stored events a reader gets at once
OUTAGE_S = 120.0  # how long a batch waits for an unreachable database before it is given up
STOPS = {*END_EVENTS, *PAUSE_EVENTS}  # an execution's last events

Subscriber = asyncio.Queue[BaseEvent | None]  # ``None``: this execution of the run has ended
Ending = tuple[str, dict[str, Any]]  # a run's id and its row's fields: how an execution ended


def kind(event: BaseEvent) -> str:
    return cast(Event, event).type


class EventLog:
    """The events of one executing run, from its first emitted event to its last write.

    Readers are served from memory: the log keeps this execution's events (the last ``KEEP``
    of them once they are stored) and hands new ones to its subscribers as they are emitted.
    The :class:`EventWriter` stores them in the background, in seq order, batched with the other
    runs' events. Every event of the run with ``seq <= floor`` is stored already (earlier
    executions, events dropped from memory); every later one of this execution is in
    ``events``. Statements :meth:`kept` with the events (a session's answer to the run) are
    written in the transaction of the next batch. An execution's last events (``STOPS``: it
    ended or paused) wait for its row's new status (:meth:`end_with`) and are stored with it,
    in one transaction: whoever reads them reads how the run stands."""

    KEEP = 2000  # stored events kept in memory for readers

    def __init__(self, writer: EventWriter, floor: int = 0) -> None:
        self.writer = writer
        self.floor = floor
        self.events: list[BaseEvent] = []  # in seq order, all above ``floor``
        self.stored = 0  # how many of ``events`` are stored (or failed to be)
        self.subscribers: set[Subscriber] = set()
        self.also: list[Statement] = []  # for the next batch's transaction
        self.ending: Ending | None = None  # the run's row fields, for the next batch
        self.failure: Exception | None = None  # what kept the last ``ending`` from the database
        self.synced = asyncio.Event()  # set while every event is stored
        self.synced.set()
        self.closed = self.finished = self.ended = False

    def add(self, event: BaseEvent) -> None:
        """Keep ``event`` for readers and for storing. Its JSON is made now: an event that
        cannot be stored raises here, in the run that emits it, and no batch ever carries it."""
        event.encoded  # noqa: B018 (made once, cached: the row's and the stream's JSON)
        self.events.append(event)
        self.synced.clear()
        self.writer.dirty(self, urgent=False)
        for queue in self.subscribers:
            queue.put_nowait(event)

    def keep(self, statement: Statement) -> None:
        """Write ``statement`` with the next batch of events (before :meth:`close` returns)."""
        self.also.append(statement)
        self.synced.clear()
        self.writer.dirty(self, urgent=False)

    async def end_with(self, run_id: str, fields: dict[str, Any]) -> None:
        """Store every event left with ``fields`` of run ``run_id``'s row (how this execution
        ended), in one transaction, at once. Raises what kept them from the database:
        :class:`~teamgraph.errors.LeaseLost` (another worker has the run: nothing more of it is
        written from here), an outage that outlasted ``OUTAGE_S``."""
        self.ending, self.ended, self.failure = (run_id, fields), True, None
        self.synced.clear()
        self.writer.dirty(self, urgent=True)
        await self.synced.wait()
        if self.failure is not None:
            raise self.failure

    def taken(self) -> tuple[list[Statement], Ending | None]:
        """The statements and the ending to write with this batch (handed over once)."""
        also, self.also = self.also, []
        ending, self.ending = self.ending, None
        return also, ending

    def subscribe(self) -> tuple[Subscriber, list[BaseEvent], int]:
        """A queue of the events to come, the events in memory and the floor below them."""
        queue: Subscriber = asyncio.Queue()
        if self.finished:
            queue.put_nowait(None)
        self.subscribers.add(queue)
        return queue, list(self.events), self.floor

    def unstored(self) -> list[BaseEvent]:
        """The events to store now: all of them but the last ones (``STOPS``) of an execution
        that has not ended yet (they wait for its status) — until the log is closed."""
        events = self.events[self.stored :]
        if self.ended or self.closed:
            return events
        stop = next((n for n, event in enumerate(events) if kind(event) in STOPS), len(events))
        return events[:stop]

    def mark_stored(self, count: int) -> None:
        self.stored += count
        if self.stored == len(self.events) and not self.also and self.ending is None:
            self.synced.set()
        drop = self.stored - self.KEEP  # only stored events leave memory
        if drop > 0:
            self.floor = self.events[drop - 1].seq
            del self.events[:drop]
            self.stored -= drop

    async def stored_all(self) -> None:
        """Wait until every event added so far is stored (at once, not at the next flush)."""
        if not self.synced.is_set():
            self.writer.dirty(self, urgent=True)
            await self.synced.wait()

    async def close(self) -> None:
        """Store everything left (new events are not accepted any more)."""
        self.closed = True
        await self.stored_all()

    def end(self) -> None:
        """End the subscribers' streams (once the run's bookkeeping is done)."""
        self.finished = True
        for queue in self.subscribers:
            queue.put_nowait(None)


@dataclass
class _Part:
    """What one run's log hands the writer for one batch."""

    log: EventLog
    events: list[BaseEvent]
    also: list[Statement]
    ending: Ending | None

    @property
    def endings(self) -> list[Ending]:
        return [self.ending] if self.ending is not None else []


class EventWriter:
    """Stores the events of every live run: one transaction per ``FLUSH_INTERVAL`` (at once when
    a closing run waits for its last events), whatever the number of runs. Its task runs while
    there is something to store: an idle writer leaves nothing pending."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.logs: dict[EventLog, None] = {}  # with unstored events, in order of arrival
        self.urgent = asyncio.Event()
        self.stopping = False
        self.task: asyncio.Task[None] | None = None

    def dirty(self, event_log: EventLog, urgent: bool) -> None:
        self.logs[event_log] = None
        if urgent:
            self.urgent.set()
        if self.task is None or self.task.done():  # a task of every run's, so of none's context
            loop = asyncio.get_running_loop()
            self.task = loop.create_task(self._loop(), context=contextvars.Context())

    async def stop(self) -> None:
        """Store what is left at once (and from now on)."""
        self.stopping = True
        self.urgent.set()
        if self.task is not None:
            await asyncio.shield(self.task)

    async def _loop(self) -> None:
        while self.logs:
            if not self.stopping and not self.urgent.is_set():
                with suppress(TimeoutError):
                    await asyncio.wait_for(self.urgent.wait(), FLUSH_INTERVAL)
            self.urgent.clear()
            batch = [_Part(item, item.unstored(), *item.taken()) for item in self.logs]
            self.logs = {}
            try:
                await self._store(batch)
            finally:  # even if this task is cancelled mid-write: no close() waits forever
                for part in batch:
                    part.log.mark_stored(len(part.events))

    async def _store(self, batch: list[_Part]) -> None:
        """One transaction for the whole batch; if the database refuses it, one per run, so
        that what one run cannot store never costs another run its events — and a run whose
        events are refused still gets its status written."""
        ends = dict(part.ending for part in batch if part.ending is not None)
        events = [e for part in batch for e in part.events]
        failure = await self._append(events, [s for part in batch for s in part.also], ends)
        if failure is None:
            return
        for part in batch:
            if len(batch) > 1:
                failure = await self._append(part.events, part.also, dict(part.endings))
            if part.ending is None:
                continue  # its events are lost (logged); the run goes on
            if failure is not None and not is_outage(failure):
                failure = await self._append([], [], dict(part.endings))  # the status alone
            part.log.failure = failure  # what its end_with raises

    async def _append(
        self, events: list[BaseEvent], also: list[Statement], ends: dict[str, dict[str, Any]]
    ) -> Exception | None:
        """Store ``events`` with ``also`` and ``ends``; what the database refused them with.
        While the database is unreachable (an outage) the write is tried again, for up to
        ``OUTAGE_S``: the runs go on, their events wait in memory."""
        delay, waited = 0.1, 0.0
        while True:
            try:
                if waited and events and await self._committed(events[-1]):
                    return None  # the last attempt committed; only its answer was lost
                await self.store.append(events, *also, ends=ends)
                point("events.stored")
                return None
            except Exception as exc:
                if not is_outage(exc) or waited >= OUTAGE_S:
                    runs = sorted({e.run_id for e in events} | set(ends))
                    log.exception("could not store %d events of runs %s", len(events), runs)
                    return exc
                outage_met()
                log.warning("storing events waits for the database (%s)", exc)
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def _committed(self, event: BaseEvent) -> bool:
        """Whether ``event`` is stored (the few events from it on are read, to the end)."""
        return any(
            [e.seq == event.seq async for e in self.store.events(event.run_id, event.seq - 1)]
        )


async def replay(
    store: RunStore, run_id: str, after_seq: int, live: EventLog | None
) -> AsyncGenerator[list[Event], None]:
    """Stored events, then (for a live run) the ones in memory and the coming ones until the
    run's execution ends, in batches of what was ready together (up to ``BATCH`` stored ones,
    the ones in memory, the live ones emitted in one go): a reader sends a batch in one write.
    The subscription is taken first; a reader that needs nothing below the live log's floor
    reads nothing from the database. Duplicates are dropped by seq."""
    queue, recent, floor = live.subscribe() if live is not None else (None, [], -1)
    last = after_seq
    try:
        if after_seq < floor or live is None:
            async for stored in _stored(store, run_id, after_seq):
                last = stored[-1].seq
                yield stored
        if batch := _after(recent, last):
            last = batch[-1].seq
            yield batch
        while queue is not None:
            coming = [await queue.get()]
            while not queue.empty():
                coming.append(queue.get_nowait())
            if batch := _after(coming, last):
                last = batch[-1].seq
                yield batch
            if coming[-1] is None:
                return
    finally:
        if live is not None and queue is not None:
            live.subscribers.discard(queue)


async def _stored(store: RunStore, run_id: str, after_seq: int) -> AsyncIterator[list[Event]]:
    """The stored events of a run above ``after_seq``, ``BATCH`` at a time."""
    batch: list[Event] = []
    async for event in store.events(run_id, after_seq):
        batch.append(event)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _after(events: Sequence[BaseEvent | None], last: int) -> list[Event]:
    """``events`` above seq ``last`` (``None``, the end of a stream, is left out)."""
    return [cast(Event, e) for e in events if e is not None and e.seq > last]


async def one_by_one(batches: AsyncGenerator[list[Event], None]) -> AsyncIterator[Event]:
    """The events of ``batches``, one at a time."""
    async with aclosing(batches):
        async for batch in batches:
            for event in batch:
                yield event


async def follow(
    store: RunStore, notes: Notifications, run_id: str, after_seq: int = 0, poll_s: float = 2.0
) -> AsyncGenerator[list[Event], None]:
    """The events of a run that executes in another process (a worker): the stored ones with
    ``seq > after_seq``, then each new batch as the process storing it announces it (PostgreSQL
    LISTEN/NOTIFY: the notification carries the batch when it fits, else the store is read),
    until the run's execution ends or pauses. The subscription is taken before
    the first read; a missed notification costs at most ``poll_s`` of delay, never an event. A
    run whose worker died keeps its stream open: the worker that takes it over continues it, and
    a database outage holds the stream until the database answers. Batches as :func:`replay`'s.
    """
    last = after_seq
    while True:
        try:
            async for batch in _follow(store, notes, run_id, last, poll_s):
                last = batch[-1].seq
                yield batch
            return
        except Exception as exc:  # the database is unreachable: the stream waits for it
            if not is_outage(exc):
                raise
            await until_reachable(lambda: store.get(run_id), what=f"following run {run_id}")


async def _follow(
    store: RunStore, notes: Notifications, run_id: str, after_seq: int, poll_s: float
) -> AsyncGenerator[list[Event], None]:
    """:func:`follow` while the database answers. A run's last events are stored with its
    status (:meth:`EventLog.end_with`): the stream ends at an end event as it comes, or when a
    read of the store — the events with the status — finds the run stopped (paused, or ended
    without its last events: the database refused them); a pause as it comes is such a read."""
    last, tail, read = after_seq, "", True
    with notes.subscribe(EVENTS, run_id) as told:
        while True:
            if read:
                while True:
                    events, status = await store.page(run_id, last)
                    for start in range(0, len(events), BATCH):
                        batch = events[start : start + BATCH]
                        last, tail = batch[-1].seq, batch[-1].type
                        yield batch
                    if len(events) < PAGE:
                        break
                if tail in END_EVENTS or status not in EXECUTING:
                    return  # read with its status: what it stored is all read
            elif tail in END_EVENTS:
                return
            elif tail in PAUSE_EVENTS:  # is it still paused? read with what may follow it
                read = True
                continue
            batches, read = _notified(await _told(told, poll_s), last)
            for batch in batches:
                last, tail = batch[-1].seq, batch[-1].type
                yield batch


async def _told(told: asyncio.Queue[str], wait: float) -> list[str]:
    """The notifications that came within ``wait`` seconds (none: a timeout)."""
    with suppress(TimeoutError):
        payloads = [await asyncio.wait_for(told.get(), wait)]
        while not told.empty():
            payloads.append(told.get_nowait())
        return payloads
    return []


def _notified(payloads: list[str], last: int) -> tuple[list[list[Event]], bool]:
    """The batches of events above seq ``last`` the notifications carry, in order, and whether
    the store must be read for the rest (a timeout — a missed notification costs a read, never
    an event — or a notification without its events)."""
    batches: list[list[Event]] = []
    for payload in payloads:
        fresh = _carried(payload, batches[-1][-1].seq if batches else last)
        if fresh is None:
            return batches, True
        if fresh:
            batches.append(fresh)
    return batches, not payloads


def _carried(payload: str, last: int) -> list[Event] | None:
    """The events above seq ``last`` a notification carries; ``None`` when the store must be
    read (it carries none, or some event between ``last`` and them is not in it)."""
    announced, encoded = carried(payload)
    if announced and announced <= last:
        return []  # read already
    events = [event_from_json(line) for line in encoded]
    fresh = [e for e in events if e.seq > last]
    return fresh if fresh and fresh[0].seq == last + 1 else None
