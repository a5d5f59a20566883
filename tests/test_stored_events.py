"""A run started in-process (Python API, CLI) stores its events as a served run does: once its
stream has ended, reading them back gives exactly what was streamed, across a pause and its
resume, and from a later process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from teamgraph.events import BaseEvent, RunCompleted, TokenDelta, TokenUsage, ToolCalled
from teamgraph.runtime.event_log import EventLog, EventWriter, follow
from teamgraph.storage.run_store import RunStore

from .helpers import by_type, desk_team, eventually


async def _stored(store: RunStore, run_id: str) -> list[str]:
    return [event.encoded async for event in store.events(run_id, 0)]


def _encoded(events: list[BaseEvent]) -> list[str]:
    return [event.encoded for event in events]


async def test_a_streamed_run_has_stored_what_it_streamed_when_its_stream_ends(
    settings: Any,
) -> None:
    async with desk_team(settings).runner() as runner:
        paused = [e async for e in runner.stream("help me", run_id="r1")]
        assert paused[-1].type == "clarification_requested"  # type: ignore[attr-defined]
        assert await _stored(runner.backend.runs, "r1") == _encoded(paused)
        resumed = [e async for e in runner.resume_stream("r1", answer="compare SQL engines")]
        stored = await _stored(runner.backend.runs, "r1")
        assert runner.writer.task is not None and runner.writer.task.done()  # nothing pending
    assert stored == _encoded(paused + resumed)
    seqs = [e.seq for e in paused + resumed]
    assert seqs == list(range(1, len(seqs) + 1))  # one sequence across the pause
    assert by_type(resumed, "run_completed")


async def test_a_finished_run_can_be_replayed_from_a_later_process(settings: Any) -> None:
    result = await desk_team(settings).run("Compare PostgreSQL and MongoDB on cost", run_id="r2")
    async with desk_team(settings).runner() as later:  # its own storage, opened again
        events = [event async for event in later.backend.runs.events("r2", 0)]
    assert events[0].type == "run_started" and events[-1].type == "run_completed"
    assert events[-1].output == result.output and result.output  # type: ignore[union-attr]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


class _Recorder:
    """A run store's stand-in that keeps what is appended, and refuses any batch holding an
    event of ``poisoned`` (as a database refuses a row)."""

    def __init__(self, poisoned: str = "") -> None:
        self.poisoned = poisoned
        self.stored: list[BaseEvent] = []
        self.ends: dict[str, dict[str, Any]] = {}

    async def append(self, events: list[BaseEvent], *also: Any, ends: Any = None) -> None:
        if any(e.run_id == self.poisoned for e in events):
            raise ValueError("refused")
        self.stored.extend(events)
        self.ends.update(ends or {})


def _tokens(run_id: str, count: int) -> list[BaseEvent]:
    return [TokenDelta(run_id=run_id, seq=n, agent="a", text=f"t{n}") for n in range(1, count + 1)]


async def test_a_run_whose_events_the_database_refuses_costs_no_other_run_an_event() -> None:
    store = _Recorder(poisoned="bad")
    writer = EventWriter(store)  # type: ignore[arg-type]
    victim, attacker = EventLog(writer), EventLog(writer)
    for good, bad in zip(_tokens("victim", 101), _tokens("bad", 101), strict=True):
        victim.add(good)
        attacker.add(bad)  # same batches: both logs are dirty at every flush
    await asyncio.gather(victim.close(), attacker.close())
    assert [e.seq for e in store.stored] == list(range(1, 102))  # the victim's 101, in order
    assert {e.run_id for e in store.stored} == {"victim"}


async def test_an_event_that_cannot_be_encoded_is_refused_by_its_own_run_only() -> None:
    store = _Recorder()
    writer = EventWriter(store)  # type: ignore[arg-type]
    victim, attacker = EventLog(writer), EventLog(writer)
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}  # deeper than any JSON encoder recurses
    victim.add(_tokens("victim", 1)[0])
    poison = ToolCalled(run_id="bad", seq=1, agent="a", tool="t", call_id="c", args=deep)
    with pytest.raises((RecursionError, ValueError)):
        attacker.add(poison)  # raised in the run that emits it
    victim.add(_tokens("victim", 2)[1])
    await asyncio.gather(victim.close(), attacker.close())
    assert [(e.run_id, e.seq) for e in store.stored] == [("victim", 1), ("victim", 2)]


async def test_a_run_s_status_is_stored_with_its_last_events_in_one_transaction(
    settings: Any,
) -> None:
    """A reader in another process that sees a run's last event sees how it ended, and the
    other way round: no moment shows one without the other."""
    writes: list[tuple[list[str], dict[str, Any]]] = []
    async with desk_team(settings).runner() as runner:
        store = runner.backend.runs
        append, update = store.append, store.update

        async def noted(events: Any, *also: Any, ends: Any = None) -> None:
            statuses = {run: fields["status"] for run, fields in (ends or {}).items()}
            writes.append(([e.type for e in events], statuses))
            await append(events, *also, ends=ends)

        async def unended(run_id: str, **fields: Any) -> None:
            assert "finished_at" not in fields, "an ending written apart from its events"
            await update(run_id, **fields)

        store.append, store.update = noted, unended  # type: ignore[method-assign]
        await runner.run("Compare PostgreSQL and MongoDB on cost", run_id="r3")
        paused = [e async for e in runner.stream("help me", run_id="r4")]
        assert (await store.get("r3")).status == "completed"
        assert (await store.get("r4")).status == "interrupted"
    ending = [(kinds, ends) for kinds, ends in writes if ends]
    assert [(kinds[-1], ends) for kinds, ends in ending] == [
        ("run_completed", {"r3": "completed"}),
        (paused[-1].type, {"r4": "interrupted"}),  # type: ignore[attr-defined]
    ]
    assert paused[-1].type == "clarification_requested"  # type: ignore[attr-defined]
    stops = {"run_completed", "clarification_requested"}
    assert not any(stops & set(kinds) for kinds, ends in writes if not ends)


async def test_a_run_whose_events_are_refused_still_gets_its_status() -> None:
    store = _Recorder(poisoned="bad")
    log = EventLog(EventWriter(store))  # type: ignore[arg-type]
    log.add(_tokens("bad", 1)[0])
    await log.end_with("bad", {"status": "completed"})
    assert store.ends == {"bad": {"status": "completed"}} and not store.stored


class _Racing:
    """A store a follower in another process reads while the run ends: its last events and its
    status are committed just after the follower's first read."""

    def __init__(self, events: list[BaseEvent]) -> None:
        self.pending, self.committed = events, []  # type: ignore[var-annotated]
        self.status, self.reads = "running", 0

    async def page(self, run_id: str, after_seq: int = 0) -> tuple[list[BaseEvent], str]:
        self.reads += 1
        read = [e for e in self.committed if e.seq > after_seq], self.status
        if self.pending:  # the run's last batch and its status commit together
            self.committed, self.pending, self.status = self.pending, [], "completed"
        return read


class _Quiet:
    @contextmanager
    def subscribe(self, channel: str, key: str) -> Iterator[asyncio.Queue[str]]:
        yield asyncio.Queue()


async def test_a_follower_gets_the_last_events_of_a_run_that_ended_as_it_read() -> None:
    ended = [
        TokenDelta(run_id="r", seq=1, agent="a", text="hi"),
        RunCompleted(run_id="r", seq=2, status="completed", output="hi", usage=TokenUsage()),
    ]
    store = _Racing(ended)
    batches = follow(store, _Quiet(), "r", poll_s=0.01)  # type: ignore[arg-type]
    got = [e.type for batch in [b async for b in batches] for e in batch]
    assert got == ["token", "run_completed"]
    assert store.reads == 2  # the status came with the events: nothing read after the end


class _RefusesFirst:
    """A store that refuses its first batch — after ``release`` — and keeps the endings."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0
        self.ends: dict[str, Any] = {}

    async def append(self, events: list[BaseEvent], *also: Any, ends: Any = None) -> None:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
            raise ValueError("refused")
        self.ends.update(ends or {})


async def test_events_refused_while_the_run_ends_do_not_fail_its_end() -> None:
    store = _RefusesFirst()
    log = EventLog(EventWriter(store))  # type: ignore[arg-type]
    log.add(_tokens("r", 1)[0])
    flushed = asyncio.create_task(log.stored_all())  # its batch is in flight …
    await eventually(lambda: store.calls == 1, "the first batch is being written")
    ending = asyncio.create_task(log.end_with("r", {"status": "completed"}))
    await asyncio.sleep(0)
    store.release.set()  # … and refused after the run asked to end
    await asyncio.gather(flushed, ending)  # the refusal is logged, not the run's end's failure
    assert store.ends == {"r": {"status": "completed"}}


class _Stopped:
    """A run that stopped without its last events (the database refused them): its stored
    events end with a token, its status says it completed."""

    async def page(self, run_id: str, after_seq: int = 0) -> tuple[list[BaseEvent], str]:
        return [e for e in _tokens("r", 2) if e.seq > after_seq], "completed"


async def test_a_follower_ends_when_the_run_stopped_without_its_last_events() -> None:
    batches = follow(_Stopped(), _Quiet(), "r", poll_s=0.01)  # type: ignore[arg-type]
    assert [e.seq for batch in [b async for b in batches] for e in batch] == [1, 2]
