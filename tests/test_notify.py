"""PostgreSQL LISTEN/NOTIFY between processes: stored events and cancel requests reach the
listeners of their run, after the data is committed; a lost connection wakes every listener."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from teamgraph import Settings
from teamgraph.events import AgentMessage, event_from_json
from teamgraph.runtime.backend import Backend, open_backend
from teamgraph.runtime.event_log import _notified
from teamgraph.storage.notify import CONTROL, EVENTS, WAKE, Notifications, carried, events_note

from .helpers import CEILING_S


@pytest.fixture
async def pg(pg_url: str, tmp_path: Path) -> AsyncIterator[tuple[Backend, Notifications]]:
    settings = Settings(database_url=pg_url, knowledge_path=tmp_path / "k.db")
    async with open_backend(settings) as backend:
        notes = Notifications(pg_url)
        await notes.start()
        try:
            yield backend, notes
        finally:
            await notes.close()


def message(run_id: str, seq: int) -> AgentMessage:
    return AgentMessage(run_id=run_id, seq=seq, agent="a", content="hi")


async def test_stored_events_notify_their_runs_listeners(pg: tuple[Backend, Notifications]) -> None:
    backend, notes = pg
    with notes.subscribe(EVENTS, "r1") as mine, notes.subscribe(EVENTS, "r2") as other:
        await backend.runs.append([message("r1", 1), message("r1", 2), message("r3", 1)])
        payload = await asyncio.wait_for(mine.get(), CEILING_S)
        assert carried(payload)[0] == 2  # the batch's last seq
        assert [event_from_json(e).seq for e in carried(payload)[1]] == [1, 2]  # and its events
        stored = [e.seq async for e in backend.runs.events("r1")]
        assert stored == [1, 2]  # committed before the notification arrived
        await asyncio.sleep(0.1)  # a stray notification would have had its chance
        assert other.empty()


async def test_a_cancel_request_reaches_the_worker(pg: tuple[Backend, Notifications]) -> None:
    backend, notes = pg
    await backend.runs.create(
        {
            "id": "r",
            "thread_id": "r",
            "team_name": "t",
            "team_spec": {},
            "pattern": "single",
            "input": "x",
            "status": "running",
        }
    )
    with notes.subscribe(CONTROL, "r") as control:
        await backend.runs.request_cancel("r")
        assert await asyncio.wait_for(control.get(), CEILING_S) == "cancel:r"
    assert (await backend.runs.get("r")).cancel_requested


async def test_a_lost_connection_wakes_every_listener(
    pg: tuple[Backend, Notifications], pg_url: str
) -> None:
    import psycopg

    _, notes = pg
    with notes.subscribe(EVENTS, "r") as queue:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            stopped = admin.execute(  # this test's database only: others run beside it
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%' "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
        assert stopped and all(done for (done,) in stopped)  # this database's listeners
        assert await asyncio.wait_for(queue.get(), CEILING_S) == WAKE
    assert notes.reconnects >= 1


def test_a_batch_too_large_to_carry_is_announced_alone() -> None:
    assert events_note("r", 3, ["x" * 4000, "y" * 4000]) == "r:3"
    assert carried(events_note("r", 3, ["{}"])) == (3, ["{}"])
    assert carried(WAKE) == (0, [])


def test_a_follower_reads_the_store_only_for_what_notifications_do_not_carry() -> None:
    def note(*seqs: int) -> str:
        return events_note("r", seqs[-1], [message("r", s).encoded for s in seqs])

    def seqs(batches: list[list[Any]]) -> list[list[int]]:
        return [[e.seq for e in batch] for batch in batches]

    batches, read = _notified([note(3, 4), note(5)], 2)
    assert seqs(batches) == [[3, 4], [5]] and not read
    batches, read = _notified([note(1, 2), note(3)], 2)  # read already, then new
    assert seqs(batches) == [[3]] and not read
    assert _notified([note(4)], 2) == ([], True)  # seq 3 is missing: read it
    assert _notified(["r:9"], 2) == ([], True)  # too large to carry
    assert _notified([WAKE], 2) == ([], True)  # the connection came back
    assert _notified([], 2) == ([], True)  # none came: a missed notification costs a read
