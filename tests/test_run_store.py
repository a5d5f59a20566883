"""The run store's conformance suite: one set of tests, run against SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, bindparam, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph import Settings
from teamgraph.errors import LeaseLost, RunNotFound, UsageError
from teamgraph.events import AgentMessage, RunCancelled
from teamgraph.runtime.backend import Backend, open_backend
from teamgraph.storage.models import MessageRow, RunRow, SessionRow, UserRow, utcnow
from teamgraph.storage.run_store import BLOCK, PAGE, RunStore

from .helpers import waits_for_the_lock_without_blocking


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/runs.db"
    else:
        url = request.getfixturevalue("pg_url")
    settings = Settings(database_url=url, knowledge_path=tmp_path / "k.db")
    async with open_backend(settings) as opened:
        yield opened


def row(run_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "thread_id": fields.pop("thread_id", run_id),
        "team_name": "team",
        "team_spec": {"name": "team", "members": [1]},
        "pattern": "single",
        "input": "hi",
        "status": "running",
        **fields,
    }


async def collect(store: RunStore, run_id: str, after: int = 0) -> list[int]:
    return [event.seq async for event in store.events(run_id, after)]


async def leased(store: RunStore, run_id: str, owner: str, ttl_s: float) -> int | None:
    """The epoch of the lease ``owner`` took (``None``: another holds it)."""
    taken = await store.take_lease(run_id, owner, ttl_s)
    return None if taken is None else taken.lease_epoch


def message(run_id: str, seq: int) -> AgentMessage:
    return AgentMessage(run_id=run_id, seq=seq, agent="a", content=f"m{seq}")


async def test_rows_are_created_updated_and_read(backend: Backend) -> None:
    runs = backend.runs
    await runs.create(row("one"))
    await runs.update("one", status="completed", usage_by_agent={"w": {"input_tokens": 3}})
    got = await runs.get("one")
    assert (got.status, got.team_spec, got.usage_by_agent) == (
        "completed",
        {"name": "team", "members": [1]},
        {"w": {"input_tokens": 3}},
    )
    with pytest.raises(RunNotFound):
        await runs.update("missing", status="failed")
    with pytest.raises(RunNotFound):
        await runs.get("missing")


async def test_a_short_id_names_its_run_and_an_ambiguous_one_says_so(backend: Backend) -> None:
    for run_id in ("ab12cd34", "ab12ff00", "99x"):
        await backend.runs.create(row(run_id))
    assert await backend.runs.resolve("ab12c") == "ab12cd34"
    assert await backend.runs.resolve("99x") == "99x"  # a whole id is its own prefix
    with pytest.raises(UsageError, match=r"'ab12' is ambiguous \(ab12cd34, ab12ff00\)"):
        await backend.runs.resolve("ab12")
    for unknown in ("zz", "", "ab%", "a_12"):  # LIKE's wildcards are not prefixes
        with pytest.raises(RunNotFound):
            await backend.runs.resolve(unknown)


async def _session(backend: Backend, user: str, session: str) -> None:
    async with backend.engine.begin() as conn:
        await conn.execute(
            insert(UserRow), {"id": user, "email": f"{user}@x.io", "password_hash": "h"}
        )
        await conn.execute(insert(SessionRow), {"id": session, "user_id": user, "team": "team"})


async def test_a_point_read_gives_a_detached_row_a_session_can_still_update(
    backend: Backend,
) -> None:
    await _session(backend, "ann", "s1")
    query = select(SessionRow).where(SessionRow.id == bindparam("sid"))
    found = await backend.direct.first(query, sid="s1")
    assert found is not None and (found.user_id, found.team) == ("ann", "team")
    assert await backend.direct.first(query, sid="nope") is None
    async with AsyncSession(backend.engine) as db:  # as if a closed session had loaded it
        found = await db.merge(found)
        found.name = "renamed"
        await db.commit()
    again = await backend.direct.first(query, sid="s1")
    assert again is not None and again.name == "renamed"
    with pytest.raises(TypeError, match="entity"):
        await backend.direct.first(select(SessionRow.id))


async def test_a_run_and_its_companions_are_stored_in_one_transaction(backend: Backend) -> None:
    await _session(backend, "u", "s")
    ok = {"id": 7, "session_id": "s", "role": "user", "content": "hi", "run_id": "one"}
    await backend.runs.create(row("one", session_id="s"), (insert(MessageRow), ok))
    assert (await backend.runs.get("one")).session_id == "s"
    bad = {**ok, "run_id": "two"}  # message id 7 again: the second statement fails
    with pytest.raises(IntegrityError):
        await backend.runs.create(row("two"), (insert(MessageRow), bad))
    with pytest.raises(RunNotFound):
        await backend.runs.get("two")  # rolled back with its message
    await backend.runs.create(row("three"))  # and the store writes on after the failure
    assert (await backend.runs.get("three")).id == "three"


async def test_a_run_is_not_stored_beside_a_session_run_that_blocks_it(backend: Backend) -> None:
    await _session(backend, "u", "s")
    runs = backend.runs
    await runs.create(row("paused", session_id="s", status="interrupted"))
    said = {"session_id": "s", "role": "user", "content": "again", "run_id": "next"}
    blocking = await runs.create(
        row("next", session_id="s"), (insert(MessageRow), said), unless=frozenset({"interrupted"})
    )
    assert blocking is not None and (blocking.id, blocking.status) == ("paused", "interrupted")
    with pytest.raises(RunNotFound):
        await runs.get("next")  # nothing stored: neither the run nor its message
    async with AsyncSession(backend.engine) as db:
        assert (await db.scalars(select(MessageRow.content))).all() == []
    await runs.update("paused", status="cancelled")
    stored = await runs.create(
        row("next", session_id="s"), (insert(MessageRow), said), unless=frozenset({"interrupted"})
    )
    assert stored is None and (await runs.get("next")).session_id == "s"


async def test_runs_started_at_once_in_one_session_are_checked_one_after_the_other(
    backend: Backend, tmp_path: Path
) -> None:
    engine_url = backend.engine.url
    url = engine_url.set(drivername=engine_url.get_backend_name())
    settings = Settings(
        database_url=url.render_as_string(hide_password=False), knowledge_path=tmp_path / "k2.db"
    )
    async with open_backend(settings) as other:  # another process's connections
        for n in range(8):
            await _session(backend, f"u{n}", f"s{n}")
            starts = [
                store.create(row(f"{n}-{i}", session_id=f"s{n}"), unless=frozenset({"running"}))
                for i, store in enumerate((backend.runs, other.runs))
            ]
            refused = await asyncio.gather(*starts)
            assert sorted(r is None for r in refused) == [False, True]  # one stored, one refused
            stored = await backend.runs.list(session_id=f"s{n}")
            assert len(stored) == 1


async def test_no_other_writer_lands_between_what_a_sqlite_transaction_reads_and_writes(
    tmp_path: Path,
) -> None:
    """``Direct.transaction`` decides its writes on what it read: on SQLite another connection
    (another process) must not commit in between: it is kept out until the transaction commits,
    or the transaction reads again."""
    async with open_backend(Settings(database_url=f"sqlite:///{tmp_path}/r.db")) as backend:
        await backend.runs.create(row("first"))
        other = sqlite3.connect(tmp_path / "r.db", timeout=0, isolation_level=None)
        seen: list[int] = []

        def count_then_write(conn: Connection) -> None:
            seen.append(conn.execute(select(func.count()).select_from(RunRow)).scalar_one())
            if len(seen) == 1:  # another process writes once, just after the first read
                with suppress(sqlite3.OperationalError):  # "locked": a process would wait
                    other.execute("UPDATE runs SET input = 'changed' WHERE id = 'first'")
            conn.execute(insert(RunRow), row(f"after-{seen[-1]}"))

        await backend.direct.transaction(count_then_write)
        other.close()
        stored = await backend.runs.list()
        changed = (await backend.runs.get("first")).input == "changed"
        assert not changed or len(seen) == 2  # a write landed only if the decision was re-read
        assert f"after-{len(stored) - 1}" in {r.id for r in stored}


async def test_owned_runs_never_leak_to_other_users(backend: Backend) -> None:
    await backend.runs.create(row("mine", user_id="alice"))
    assert (await backend.runs.owned("mine", "alice")) is not None
    assert await backend.runs.owned("mine", "bob") is None
    assert await backend.runs.owned("unknown", "alice") is None


async def test_lists_filter_and_come_newest_first(backend: Backend) -> None:
    runs = backend.runs
    start = utcnow() - timedelta(minutes=10)
    for i, (user, session, status) in enumerate(
        [
            ("alice", "s1", "completed"),
            ("alice", "s1", "interrupted"),
            ("bob", "s2", "interrupted"),
            ("alice", "s3", "running"),
        ]
    ):
        created = start + timedelta(minutes=i)
        await runs.create(
            row(f"r{i}", user_id=user, session_id=session, status=status, created_at=created)
        )
    assert [r.id for r in await runs.list()] == ["r3", "r2", "r1", "r0"]
    assert [r.id for r in await runs.list(2)] == ["r3", "r2"]
    assert [r.id for r in await runs.list(user_id="alice")] == ["r3", "r1", "r0"]
    assert [r.id for r in await runs.list(session_id="s1")] == ["r1", "r0"]
    paused = await runs.list(user_id="alice", status="interrupted")
    assert [r.id for r in paused] == ["r1"]
    recent = await runs.list(since=start + timedelta(minutes=2))
    assert [r.id for r in recent] == ["r3", "r2"]
    assert [r.id for r in await runs.list(session_id="s1", ids=["r0", "r2", "r3"])] == ["r0"]
    assert await runs.list(ids=[]) == []
    latest = await runs.latest_in_session("s1")
    assert latest is not None and latest.id == "r1"
    assert await runs.latest_in_session("nothing") is None
    assert await runs.count_by_status() == {"completed": 1, "interrupted": 2, "running": 1}


async def test_a_sessions_cost_is_the_sum_of_its_runs(backend: Backend) -> None:
    runs = backend.runs
    for run_id, session, cost in [("a", "s1", 0.25), ("b", "s1", 0.5), ("c", "s2", 0.125)]:
        await runs.create(row(run_id, session_id=session, cost_usd=cost))
    await runs.create(row("no-session"))
    assert await runs.cost_by_session(["s1", "s2", "s3"]) == {"s1": 0.75, "s2": 0.125}
    assert await runs.cost_by_session(["s2"]) == {"s2": 0.125}
    assert await runs.cost_by_session([]) == {}


async def test_events_are_read_back_in_order_past_a_page(backend: Backend) -> None:
    runs = backend.runs
    count = PAGE + 7
    await runs.append([message("big", seq) for seq in range(count, 0, -1)])  # any order
    await runs.append([message("other", 1)])
    assert await collect(runs, "big") == list(range(1, count + 1))
    assert await collect(runs, "big", after=PAGE) == list(range(PAGE + 1, count + 1))
    assert await collect(runs, "other") == [1]
    events = [event async for event in runs.events("big", count - 1)]
    assert events == [message("big", count).model_copy(update={"ts": events[0].ts})]


async def test_seqs_are_reserved_ahead_in_the_row(backend: Backend) -> None:
    """Every seq handed out is at or below the row's last_seq once reservations settle, and a
    reservation is written only every half block."""
    runs = backend.runs
    await runs.create(row("r", last_seq=BLOCK))
    seqs = runs.seqs("r", start=0, reserved=BLOCK)
    writes = 0
    real_update = runs.update

    async def counted(run_id: str, **fields: Any) -> None:
        nonlocal writes
        writes += 1
        await real_update(run_id, **fields)

    runs.update = counted  # type: ignore[method-assign]
    handed = [seqs.next() for _ in range(3 * BLOCK)]
    await seqs.settle()
    assert handed == list(range(1, 3 * BLOCK + 1))
    assert (await runs.get("r")).last_seq >= handed[-1]
    assert writes <= 3 * BLOCK // (BLOCK // 2)


async def test_a_stored_run_is_cancelled_above_every_seq_it_used(backend: Backend) -> None:
    runs = backend.runs
    await runs.create(row("paused", status="interrupted", last_seq=40))
    await runs.cancel_stored("paused", "closed by the user", after_seq=55)
    got = await runs.get("paused")
    assert (got.status, got.last_seq) == ("cancelled", 56)
    events = [event async for event in runs.events("paused")]
    assert [(e.seq, e.type) for e in events] == [(56, "run_cancelled")]


async def test_a_stored_run_is_cancelled_whole_or_not_at_all(tmp_path: Path) -> None:
    async with open_backend(Settings(database_url=f"sqlite:///{tmp_path}/r.db")) as backend:
        runs = backend.runs
        await runs.create(row("paused", status="interrupted"))
        refuse = (
            "CREATE TRIGGER refuse BEFORE UPDATE OF status ON runs"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        await backend.direct.write(text(refuse))
        with pytest.raises(IntegrityError, match="refused"):
            await runs.cancel_stored("paused", "closed by the user")
        assert [event async for event in runs.events("paused")] == []  # no event without its status
        assert (await runs.get("paused")).status == "interrupted"


async def test_sqlite_writes_never_block_the_event_loop(tmp_path: Path) -> None:
    async with open_backend(Settings(database_url=f"sqlite:///{tmp_path}/r.db")) as backend:
        creating = backend.runs.create(row("two"))
        await waits_for_the_lock_without_blocking(tmp_path / "r.db", creating)
        assert (await backend.runs.get("two")).input == "hi"
        appending = backend.runs.append([message("two", 1)])
        await waits_for_the_lock_without_blocking(tmp_path / "r.db", appending)
        assert await collect(backend.runs, "two") == [1]
        await _session(backend, "u", "s")
        checked = backend.runs.create(row("three", session_id="s"), unless=frozenset({"running"}))
        await waits_for_the_lock_without_blocking(tmp_path / "r.db", checked)
        assert (await backend.runs.get("three")).session_id == "s"
        await asyncio.sleep(0)


async def test_a_lease_is_held_by_one_process_at_a_time(backend: Backend) -> None:
    runs = backend.runs
    await runs.create(row("r"))
    first = await leased(runs, "r", "worker-a", ttl_s=30)
    assert first == 1
    assert await leased(runs, "r", "worker-b", ttl_s=30) is None  # held and not expired
    assert await runs.renew_lease("r", "worker-a", first, ttl_s=30) is False  # no cancel asked
    await runs.request_cancel("r")
    assert await runs.renew_lease("r", "worker-a", first, ttl_s=30) is True  # cancel asked
    await runs.release_lease("r", "worker-a", first)
    second = await leased(runs, "r", "worker-b", ttl_s=30)
    assert second == 2  # a new epoch; the cancel request stands until the run is resumed
    assert await runs.renew_lease("r", "worker-b", second, ttl_s=30) is True
    assert await runs.renew_lease("r", "worker-a", first, ttl_s=30) is None  # a's is lost


async def test_an_expired_lease_can_be_taken_over(backend: Backend) -> None:
    runs = backend.runs
    await runs.create(row("r"))
    old = await leased(runs, "r", "dead-worker", ttl_s=0.05)
    await asyncio.sleep(0.1)
    new = await leased(runs, "r", "live-worker", ttl_s=30)
    assert old == 1 and new == 2
    assert await runs.renew_lease("r", "dead-worker", 1, ttl_s=30) is None  # fenced off


async def test_runs_started_at_once_on_a_new_sqlite_file_all_set_it_up(tmp_path: Path) -> None:
    import asyncio

    from teamgraph import Settings, Team

    settings = Settings(database_url=f"sqlite:///{tmp_path}/new.db")
    team = Team.from_dict(
        {"name": "t", "pattern": "single", "members": ["researcher"]}, settings=settings
    )
    results = await asyncio.gather(*(team.run(f"question {i}") for i in range(4)))
    assert [r.status for r in results] == ["completed"] * 4


async def test_a_worker_that_lost_its_lease_writes_nothing_more(backend: Backend) -> None:
    runs = backend.runs
    await runs.create(row("r"))
    old = await leased(runs, "r", "slow-worker", ttl_s=0.05)
    assert old is not None
    runs.fence("r", "slow-worker", old)
    await runs.update("r", input_tokens=1)  # it holds the lease: its writes land
    await asyncio.sleep(0.1)
    assert await leased(runs, "r", "new-worker", ttl_s=30) == old + 1
    with pytest.raises(LeaseLost):
        await runs.update("r", status="cancelled")
    with pytest.raises(LeaseLost):
        await runs.cancel_stored("r", "cancelled")  # neither its status nor its event
    assert (await runs.get("r")).status == "running"
    assert [e async for e in runs.events("r")] == []
    runs.abandon("r")  # given up: its events are dropped, the new worker's seqs are its own
    await runs.append([RunCancelled(run_id="r", seq=5, path=["t"], reason="x")])
    runs.unfence("r")
    assert [e async for e in runs.events("r")] == []


async def test_a_run_s_ending_is_stored_with_its_events_only_under_its_lease(
    backend: Backend,
) -> None:
    runs = backend.runs
    await runs.create(row("mine"))
    await runs.create(row("lost"))
    for run_id in ("mine", "lost"):
        epoch = await leased(runs, run_id, "worker", ttl_s=30)
        assert epoch is not None
        runs.fence(run_id, "worker", epoch if run_id == "mine" else epoch + 1)  # "lost": taken
    ended = {"status": "completed", "output": "done", "finished_at": utcnow()}
    mine = message("mine", 1)
    both = [mine, message("lost", 1)]
    with pytest.raises(LeaseLost):  # one run's lost lease: nothing of the transaction lands
        await runs.append(both, ends={"mine": ended, "lost": ended})
    assert await collect(runs, "mine") == await collect(runs, "lost") == []
    assert (await runs.get("mine")).status == "running"
    await runs.append(both, ends={"mine": ended})  # "lost" is given up: its event is dropped
    assert (await collect(runs, "mine"), await collect(runs, "lost")) == ([1], [])
    stored = await runs.get("mine")
    assert (stored.status, stored.output) == ("completed", "done")
    assert await runs.page("mine") == ([mine], "completed")
    assert await runs.page("mine", 1) == ([], "completed")
    with pytest.raises(RunNotFound):
        await runs.page("nobody")


async def test_only_a_queued_run_no_worker_claimed_is_cancelled_at_once(backend: Backend) -> None:
    runs = backend.runs
    await runs.create({**row("queued"), "status": "pending", "last_seq": 10})
    await runs.create({**row("claimed"), "status": "pending"})
    assert await leased(runs, "claimed", "worker", ttl_s=30) is not None
    assert await runs.cancel_if_queued("queued", "cancelled") is True
    assert await runs.cancel_if_queued("claimed", "cancelled") is False
    queued = await runs.get("queued")
    assert (queued.status, queued.last_seq) == ("cancelled", 11)
    assert [e.type async for e in runs.events("queued")] == ["run_cancelled"]
    assert (await runs.get("claimed")).status == "pending"
    await runs.create({**row("clash"), "status": "pending", "last_seq": 3})
    await runs.append([message("clash", 4)])  # seq 4 is taken: the cancel's event cannot be
    with pytest.raises(IntegrityError):
        await runs.cancel_if_queued("clash", "cancelled")
    assert (await runs.get("clash")).status == "pending"  # one transaction: nothing of it stays


async def test_orphans_are_the_executing_runs_no_process_holds(backend: Backend) -> None:
    """What a worker's sweep queues again: a ``pending`` run no worker holds and a ``running``
    one whose lease lapsed — not a live one, an in-process one, or an ended one."""
    runs, old = backend.runs, utcnow() - timedelta(minutes=5)
    lapsed = {"lease_owner": "w:1", "lease_epoch": 2, "lease_until": old}
    await runs.create(row("never-queued", status="pending", created_at=old, updated_at=old))
    await runs.create(row("lapsed", created_at=old, updated_at=old, **lapsed))
    await runs.create(row("in-process", created_at=old, updated_at=old))  # epoch 0: no worker
    await runs.create(row("done", status="completed", created_at=old, updated_at=old, **lapsed))
    await runs.create(row("fresh", status="pending"))
    await runs.create(row("renewed", created_at=old, updated_at=old))
    assert await leased(runs, "renewed", "w:2", 60)  # held: its worker renews it
    await runs.update("renewed", updated_at=old)
    found = [r.id for r in await runs.orphans(utcnow() - timedelta(minutes=1))]
    assert sorted(found) == ["lapsed", "never-queued"]
