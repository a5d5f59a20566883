"""The run store: the one owner of run rows, their events and the allocation of event seqs.

Everything that reads or writes the ``runs`` and ``events`` tables goes through a
:class:`RunStore` — the runner, the server's run manager and routes, the CLI, the metrics.
:class:`SqlRunStore` is the implementation for both databases: on SQLite its hot-path writes
commit on the event loop (never waiting for a lock there; a worker thread waits when another
connection holds it, see :mod:`teamgraph.storage.direct`), on PostgreSQL they use the async
engine. One conformance suite (``tests/test_run_store.py``) runs against both.

**Seqs.** Every event of a run has a ``seq``, increasing across executions of the run (a resumed
run continues above anything an earlier execution could have used, even one that crashed). A
:class:`SeqBlock` hands seqs out in memory and keeps a high-water mark *reserved* in the run's row
ahead of them: the row's ``last_seq`` is always at or above every seq handed out."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    Connection,
    Executable,
    Row,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import make_transient_to_detached

from teamgraph import faults
from teamgraph.errors import LeaseLost, RunNotFound, UsageError
from teamgraph.events import BaseEvent, Event, RunCancelled, event_from_json
from teamgraph.status import RunStatus
from teamgraph.storage.direct import Direct, Statement
from teamgraph.storage.models import (
    EventRow,
    MessageRow,
    RunRow,
    SessionRow,
    TurnResultRow,
    utcnow,
)
from teamgraph.storage.notify import CONTROL, EVENTS, events_note, notify_statement

BLOCK = 1000  # seqs reserved in one row write
ROW_RESERVE = 10 * BLOCK  # seqs reserved by the write that starts (or resumes) an execution
PAGE = 500  # stored events read per query
ABANDONED = -1  # the lease epoch of a run this process gave up
RECLAIM_PAGES = 1024  # SQLite pages given back to the file system per transaction
_UPDATE = update(RunRow).where(RunRow.id == bindparam("run_id_"))  # built and compiled once
_FENCED = _UPDATE.where(  # a run this process executes under a lease: only while it holds it
    RunRow.lease_owner == bindparam("owner_"), RunRow.lease_epoch == bindparam("epoch_")
)
# point reads, built once (Direct.first)
_RUN = select(RunRow).where(RunRow.id == bindparam("run_id"))
_OWNED_RUN = _RUN.where(RunRow.user_id == bindparam("user_id"))
_LATEST_IN_SESSION = (
    select(RunRow)
    .where(RunRow.session_id == bindparam("session_id"))
    .order_by(RunRow.created_at.desc())
    .limit(1)
)
_PAGE = (  # a run's status with its events above a seq (one row of status alone for none)
    select(RunRow.status, EventRow.data)
    .select_from(RunRow)
    .outerjoin(EventRow, and_(EventRow.run_id == RunRow.id, EventRow.seq > bindparam("after_seq")))
    .where(RunRow.id == bindparam("run_id"))
    .order_by(EventRow.seq)
    .limit(PAGE)
)
# PostgreSQL: runs of one session are created one at a time, whichever process creates them
_LOCK_SESSION = (
    select(SessionRow.id).where(SessionRow.id == bindparam("session_id")).with_for_update()
)


class SeqBlock:
    """Event seqs of one execution of a run: ``next()`` hands them out in order; whenever fewer
    than half a block are left reserved, a larger reservation is written in the background.
    ``settle()`` waits for those writes (before the run's last row write)."""

    def __init__(self, store: RunStore, run_id: str, start: int, reserved: int) -> None:
        self.store, self.run_id = store, run_id
        self.last = start
        self.reserved = max(start, reserved)
        self._writes: set[asyncio.Task[None]] = set()

    def next(self) -> int:
        self.last += 1
        if self.last >= self.reserved - BLOCK // 2:
            self.reserved = max(self.reserved, self.last) + BLOCK
            task = asyncio.get_running_loop().create_task(
                self.store.update(self.run_id, last_seq=self.reserved)
            )
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        return self.last

    async def settle(self) -> None:
        """Wait for reservations under way (a late one must never overwrite a final write)."""
        await asyncio.gather(*self._writes)


class RunStore(Protocol):
    """Run rows, their events and seq allocation."""

    async def setup(self) -> None: ...

    # --- rows
    async def create(
        self, row: dict[str, Any], *also: Statement, unless: frozenset[RunStatus] = frozenset()
    ) -> RunRow | None: ...
    async def update(self, run_id: str, **fields: Any) -> None: ...
    async def get(self, run_id: str) -> RunRow: ...
    async def resolve(self, prefix: str) -> str: ...
    async def owned(self, run_id: str, user_id: str) -> RunRow | None: ...
    async def list(
        self,
        limit: int = 50,
        *,
        since: datetime | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        status: RunStatus | None = None,
        ids: Collection[str] | None = None,
    ) -> list[RunRow]: ...
    async def orphans(self, idle_since: datetime, limit: int = 100) -> Sequence[RunRow]: ...
    async def latest_in_session(self, session_id: str) -> RunRow | None: ...
    async def cost_by_session(self, session_ids: Collection[str]) -> dict[str, float]: ...
    async def count_by_status(self) -> dict[str, int]: ...

    # --- events and seqs
    async def append(
        self,
        events: Sequence[BaseEvent],
        *also: Statement,
        ends: Mapping[str, dict[str, Any]] | None = None,
    ) -> None: ...
    async def page(
        self, run_id: str, after_seq: int = 0
    ) -> tuple[builtins.list[Event], RunStatus]: ...
    def events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]: ...
    async def events_of(
        self, run_ids: Collection[str], types: Collection[str]
    ) -> Sequence[Event]: ...
    def seqs(self, run_id: str, start: int, reserved: int) -> SeqBlock: ...
    async def cancel_stored(self, run_id: str, reason: str, after_seq: int = 0) -> None: ...

    # --- leases: which process executes a run
    async def take_lease(self, run_id: str, owner: str, ttl_s: float) -> RunRow | None: ...
    async def renew_lease(
        self, run_id: str, owner: str, epoch: int, ttl_s: float
    ) -> bool | None: ...
    async def release_lease(self, run_id: str, owner: str, epoch: int) -> None: ...
    def fence(self, run_id: str, owner: str, epoch: int) -> None: ...
    def unfence(self, run_id: str) -> None: ...
    def abandon(self, run_id: str) -> None: ...
    async def request_cancel(self, run_id: str) -> None: ...
    async def cancel_if_queued(self, run_id: str, reason: str) -> bool: ...

    # --- retention: runs removed whole
    async def expired(
        self, before: datetime, statuses: Collection[RunStatus], limit: int, offset: int = 0
    ) -> builtins.list[tuple[str, str]]: ...
    async def threads_in_use(
        self, thread_ids: Collection[str], besides: Collection[str]
    ) -> set[str]: ...
    async def delete(self, run_ids: Collection[str]) -> None: ...
    async def reclaim(self) -> int: ...


class SqlRunStore:
    """:class:`RunStore` on SQLAlchemy: SQLite (no-wait hot path) or PostgreSQL."""

    def __init__(self, engine: AsyncEngine, direct: Direct) -> None:
        self.engine = engine
        self.direct = direct
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._fences: dict[str, tuple[str, int]] = {}  # run id → (lease owner, epoch)

    async def setup(self) -> None:
        """Migrate the app tables to the latest schema (Alembic)."""
        await upgrade(self.engine)

    # --- rows ------------------------------------------------------------------------------------
    async def create(
        self, row: dict[str, Any], *also: Statement, unless: frozenset[RunStatus] = frozenset()
    ) -> RunRow | None:
        """Store a new run's row — with ``also`` (e.g. the user's message) in one transaction.
        ``unless``: the latest run of the row's session must not stand in one of these statuses;
        when it does, nothing is stored and that run is returned. The check is made in the
        transaction that stores the run, on PostgreSQL with the session's row locked: runs
        started at once in one session, from two API processes too, are checked one after the
        other. Parameters go apart from the statement: a cached statement."""
        statements = [(insert(RunRow), row), *also]
        if not unless:
            await self.direct.run(statements)
            faults.point("run.stored")
            return None

        def create_unless(conn: Connection) -> RunRow | None:
            session = {"session_id": row["session_id"]}
            if conn.dialect.name == "postgresql":
                conn.execute(_LOCK_SESSION, session)
            latest = conn.execute(_LATEST_IN_SESSION, session).first()
            if latest is not None and latest.status in unless:
                return _detached(latest)
            for statement, parameters in statements:
                conn.execute(statement, parameters)
            return None

        latest = await self.direct.transaction(create_unless)
        if latest is None:
            faults.point("run.stored")
        return latest

    async def update(self, run_id: str, **fields: Any) -> None:
        """Set fields of a run's row; a fenced run's (:meth:`fence`) only while this process
        still holds its lease (:class:`LeaseLost` otherwise: another worker took it over)."""
        statement, parameters = self._update(run_id, fields)
        if await self.direct.write(statement, parameters) == 0:
            raise self._not_updated(run_id)

    def _update(self, run_id: str, fields: dict[str, Any]) -> tuple[Executable, dict[str, Any]]:
        """The statement setting ``fields`` of the run's row (fenced while under a lease)."""
        parameters = {**fields, "updated_at": utcnow(), "run_id_": run_id}  # SET: the fields
        fence = self._fences.get(run_id)
        if fence is None:
            return _UPDATE, parameters
        return _FENCED, {**parameters, "owner_": fence[0], "epoch_": fence[1]}

    def _not_updated(self, run_id: str) -> Exception:
        if run_id in self._fences:
            return LeaseLost(f"run {run_id} was taken over by another worker")
        return RunNotFound(f"no run with id {run_id!r}")

    async def get(self, run_id: str) -> RunRow:
        row = await self.direct.first(_RUN, run_id=run_id)
        if row is None:
            raise RunNotFound(f"no run with id {run_id!r}")
        return row

    async def resolve(self, prefix: str) -> str:
        """The id of the one run whose id starts with ``prefix`` (a short id, as the CLI shows
        them); :class:`RunNotFound` for none, :class:`UsageError` naming them for several."""
        if not prefix or any(c in prefix for c in "%_\\"):
            raise RunNotFound(f"no run with id {prefix!r}")
        query = select(RunRow.id).where(RunRow.id.startswith(prefix)).order_by(RunRow.id).limit(3)
        found = [row[0] for row in await self.direct.rows(query)]
        if not found:
            raise RunNotFound(f"no run with id {prefix!r}")
        if len(found) > 1:
            shown = ", ".join(found[:2]) + (", …" if len(found) > 2 else "")
            raise UsageError(f"run id {prefix!r} is ambiguous ({shown}): give more characters")
        return str(found[0])

    async def owned(self, run_id: str, user_id: str) -> RunRow | None:
        """The run if ``user_id`` owns it; ``None`` for unknown and foreign ids alike."""
        return await self.direct.first(_OWNED_RUN, run_id=run_id, user_id=user_id)

    async def list(
        self,
        limit: int = 50,
        *,
        since: datetime | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        status: RunStatus | None = None,
        ids: Collection[str] | None = None,
    ) -> list[RunRow]:
        """Runs, newest first, filtered by any of: start time, owner, session, status, ids."""
        query = select(RunRow).order_by(RunRow.created_at.desc()).limit(limit)
        if ids is not None:
            query = query.where(RunRow.id.in_(list(ids)))
        if since is not None:
            query = query.where(RunRow.created_at >= since)
        if user_id is not None:
            query = query.where(RunRow.user_id == user_id)
        if session_id is not None:
            query = query.where(RunRow.session_id == session_id)
        if status is not None:
            query = query.where(RunRow.status == status)
        async with self.sessions() as session:
            return list((await session.scalars(query)).all())

    async def orphans(self, idle_since: datetime, limit: int = 100) -> Sequence[RunRow]:
        """Runs stored as executing that no process executes, oldest first: ``pending`` ones
        no worker holds, untouched since ``idle_since`` (never queued, or their job lost), and
        ``running`` ones a worker had claimed whose lease has been free or lapsed since
        ``idle_since`` (an outage stopped them and their worker died since)."""
        lapsed = or_(RunRow.lease_until.is_(None), RunRow.lease_until < idle_since)
        never_queued = and_(
            RunRow.status == "pending",
            RunRow.lease_owner.is_(None),
            RunRow.updated_at < idle_since,
        )
        abandoned = and_(RunRow.status == "running", RunRow.lease_epoch > 0, lapsed)
        query = (
            select(RunRow)
            .where(or_(never_queued, abandoned), RunRow.updated_at < idle_since)
            .order_by(RunRow.updated_at)
            .limit(limit)
        )
        async with self.sessions() as session:
            return list((await session.scalars(query)).all())

    async def latest_in_session(self, session_id: str) -> RunRow | None:
        return await self.direct.first(_LATEST_IN_SESSION, session_id=session_id)

    async def cost_by_session(self, session_ids: Collection[str]) -> dict[str, float]:
        """What the runs of each of these sessions cost in all (USD; sessions with runs only)."""
        if not session_ids:
            return {}
        query = (
            select(RunRow.session_id, func.sum(RunRow.cost_usd))
            .where(RunRow.session_id.in_(list(session_ids)))
            .group_by(RunRow.session_id)
        )
        rows: list[Any] = await self.direct.rows(query)
        return {str(session): float(cost or 0.0) for session, cost in rows}

    async def count_by_status(self) -> dict[str, int]:
        query = select(RunRow.status, func.count()).group_by(RunRow.status)
        rows: list[Any] = await self.direct.rows(query)
        return {str(status): int(count) for status, count in rows}

    # --- events and seqs ---------------------------------------------------------------------
    async def append(
        self,
        events: Sequence[BaseEvent],
        *also: Statement,
        ends: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        """Store events (of any runs) in one transaction, with ``also`` and, for each run in
        ``ends``, the fields of its row that say how its execution ended — written as
        :meth:`update` writes them: a fenced run's only while this process holds its lease.
        When it does not, nothing is stored (:class:`LeaseLost`) and nothing more of that run
        will be (:meth:`abandon`)."""
        statements = self._stored(events, *also)
        if not ends:
            if statements:
                await self.direct.run(statements)
            return
        updates = {run_id: self._update(run_id, fields) for run_id, fields in ends.items()}

        def store(conn: Connection) -> None:
            for run_id, (update_, values) in updates.items():  # each row first: it is locked
                if conn.execute(update_, values).rowcount == 0:
                    lost = self._not_updated(run_id)
                    if isinstance(lost, LeaseLost):
                        self.abandon(run_id)
                    raise lost
            for insert_, parameters in statements:
                conn.execute(insert_, parameters)

        await self.direct.transaction(store)

    def _stored(self, events: Sequence[BaseEvent], *also: Statement) -> Sequence[Statement]:
        """The statements that store ``events`` (those this process still writes) with ``also``."""
        return [*_inserted(self._kept(events)), *also]

    def _kept(self, events: Sequence[BaseEvent]) -> Sequence[BaseEvent]:
        """``events`` but those of runs this process gave up (:meth:`abandon`): another worker
        continues them, from seqs of its own."""
        if not self._fences:
            return events
        return [e for e in events if self._fences.get(e.run_id, ("", 0))[1] != ABANDONED]

    async def page(self, run_id: str, after_seq: int = 0) -> tuple[builtins.list[Event], RunStatus]:
        """Up to ``PAGE`` stored events of a run with ``seq > after_seq``, in order, and the
        run's status — read together, in one statement: a run whose status says it stopped has
        no event beyond the ones read with it."""
        rows: list[Any] = await self.direct.rows(_PAGE, run_id=run_id, after_seq=after_seq)
        if not rows:
            raise RunNotFound(f"no run with id {run_id!r}")
        events = [event_from_json(row.data) for row in rows if row.data is not None]
        return events, rows[0].status

    async def events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """The stored events of a run with ``seq > after_seq``, in order, a page at a time."""
        while True:
            query = (
                select(EventRow.seq, EventRow.data)
                .where(EventRow.run_id == run_id, EventRow.seq > after_seq)
                .order_by(EventRow.seq)
                .limit(PAGE)
            )
            rows: list[Any] = await self.direct.rows(query)
            for row in rows:
                yield event_from_json(row.data)
            if len(rows) < PAGE:
                return
            after_seq = rows[-1].seq

    async def events_of(self, run_ids: Collection[str], types: Collection[str]) -> Sequence[Event]:
        """The stored events of the given types of several runs, by run then seq (a thread's
        tool calls and questions, read in one query)."""
        if not run_ids or not types:
            return []
        query = (
            select(EventRow.data)
            .where(EventRow.run_id.in_(list(run_ids)), EventRow.type.in_(list(types)))
            .order_by(EventRow.run_id, EventRow.seq)
        )
        rows: list[Any] = await self.direct.rows(query)
        return [event_from_json(row.data) for row in rows]

    def seqs(self, run_id: str, start: int, reserved: int) -> SeqBlock:
        return SeqBlock(self, run_id, start, reserved)

    async def cancel_stored(self, run_id: str, reason: str, after_seq: int = 0) -> None:
        """End a run that is not executing: log ``run_cancelled`` (above every seq it used) and
        set its status ``cancelled``, in one transaction."""
        row = await self.get(run_id)
        seq = max(row.last_seq, after_seq) + 1
        ended = {"status": "cancelled", "error": "cancelled", "last_seq": seq}
        statement, parameters = self._update(row.id, {**ended, "finished_at": utcnow()})
        event = RunCancelled(run_id=row.id, seq=seq, path=[row.team_name], reason=reason)
        stored = self._stored([event])

        def cancel(conn: Connection) -> None:
            if conn.execute(statement, parameters).rowcount == 0:
                raise self._not_updated(row.id)  # and the event is not stored either
            for insert_, values in stored:
                conn.execute(insert_, values)

        await self.direct.transaction(cancel)

    # --- leases -----------------------------------------------------------------------------------
    async def take_lease(self, run_id: str, owner: str, ttl_s: float) -> RunRow | None:
        """Take the run's lease for ``ttl_s`` seconds if no one holds it (or its holder let it
        expire): the run's row as it stands with the lease taken (its new ``lease_epoch``), read
        by the write that takes it; ``None`` when another process holds it. Taking it clears
        neither its status nor a cancel request."""
        now = utcnow()
        statement = (
            update(RunRow)
            .where(
                RunRow.id == run_id,
                or_(RunRow.lease_owner.is_(None), RunRow.lease_until < now),
            )
            .values(
                lease_owner=owner,
                lease_until=now + timedelta(seconds=ttl_s),
                lease_epoch=RunRow.lease_epoch + 1,
            )
            .returning(*RunRow.__table__.columns)
        )
        rows = await self.direct.returning(statement)
        return _detached(rows[0]) if rows else None

    async def renew_lease(self, run_id: str, owner: str, epoch: int, ttl_s: float) -> bool | None:
        """Extend a lease this process holds: ``None`` if it is lost (another took the run),
        else whether a cancel was requested."""
        statement = (
            update(RunRow)
            .where(RunRow.id == run_id, RunRow.lease_owner == owner, RunRow.lease_epoch == epoch)
            .values(lease_until=utcnow() + timedelta(seconds=ttl_s))
            .returning(RunRow.cancel_requested)
        )
        rows = await self.direct.returning(statement)
        return bool(rows[0][0]) if rows else None

    async def release_lease(self, run_id: str, owner: str, epoch: int) -> None:
        statement = (
            update(RunRow)
            .where(RunRow.id == run_id, RunRow.lease_owner == owner, RunRow.lease_epoch == epoch)
            .values(lease_owner=None, lease_until=None)
        )
        await self.direct.write(statement)

    def fence(self, run_id: str, owner: str, epoch: int) -> None:
        """From now on this process writes the run's row only while it holds lease ``epoch``."""
        self._fences[run_id] = (owner, epoch)

    def unfence(self, run_id: str) -> None:
        self._fences.pop(run_id, None)

    def abandon(self, run_id: str) -> None:
        """This process stops writing anything of the run (its row, its events): another
        worker has taken it over, or is about to."""
        self._fences[run_id] = ("", ABANDONED)

    async def cancel_if_queued(self, run_id: str, reason: str) -> bool:
        """Cancel a run that waits in the queue and no worker has claimed (``False``: one has,
        or it is not queued): its status and its ``run_cancelled`` event in one transaction —
        the conditional write first (it locks the row; its ``last_seq`` is the event's seq)."""
        now = utcnow()
        statement = (
            update(RunRow)
            .where(RunRow.id == run_id, RunRow.status == "pending", RunRow.lease_owner.is_(None))
            .values(
                status="cancelled",
                error="cancelled",
                finished_at=now,
                updated_at=now,
                last_seq=RunRow.last_seq + 1,
            )
            .returning(RunRow.last_seq, RunRow.team_name)
        )

        def cancel(conn: Connection) -> bool:
            found: Any = conn.execute(statement).first()
            if found is None:
                return False
            path = [str(found.team_name)]
            event = RunCancelled(run_id=run_id, seq=int(found.last_seq), path=path, reason=reason)
            for insert_, values in self._stored([event]):
                conn.execute(insert_, values)
            return True

        return await self.direct.transaction(cancel)

    async def request_cancel(self, run_id: str) -> None:
        """Ask whichever process executes the run to stop it (it checks at its next lease
        renewal; PostgreSQL also tells it at once)."""
        await self.direct.write(
            update(RunRow).where(RunRow.id == run_id).values(cancel_requested=True)
        )

    # --- retention ----------------------------------------------------------------------------
    async def expired(
        self, before: datetime, statuses: Collection[RunStatus], limit: int, offset: int = 0
    ) -> builtins.list[tuple[str, str]]:
        """Up to ``limit`` runs (after the first ``offset``) in one of ``statuses``, unchanged
        since ``before`` and held by no live lease, oldest first: their ids and thread ids."""
        query = (
            select(RunRow.id, RunRow.thread_id)
            .where(
                RunRow.status.in_(list(statuses)),
                RunRow.updated_at < before,
                or_(RunRow.lease_owner.is_(None), RunRow.lease_until < utcnow()),
            )
            .order_by(RunRow.updated_at, RunRow.id)
            .limit(limit)
            .offset(offset)
        )
        rows: Any = await self.direct.rows(query)
        return [(str(run), str(thread)) for run, thread in rows]

    async def threads_in_use(
        self, thread_ids: Collection[str], besides: Collection[str]
    ) -> set[str]:
        """Which of these threads a run other than ``besides`` works on (a session's runs
        share its thread)."""
        query = select(RunRow.thread_id).where(
            RunRow.thread_id.in_(list(thread_ids)), RunRow.id.not_in(list(besides))
        )
        return {str(thread) for (thread,) in await self.direct.rows(query.distinct())}

    async def delete(self, run_ids: Collection[str]) -> None:
        """Remove runs with their events, messages and turn results, in one transaction."""
        ids = list(run_ids)
        if ids:
            await self.direct.run(
                [(delete(table).where(column.in_(ids)), None) for table, column in _OWNED_BY_RUN]
            )

    async def reclaim(self) -> int:
        """Give the pages that deletes freed back to the file system (SQLite, in
        ``auto_vacuum=INCREMENTAL`` files: a few megabytes per transaction, so that no writer
        waits long); the pages given back. PostgreSQL: nothing (autovacuum reuses them)."""
        if self.engine.dialect.name != "sqlite":
            return 0
        freed = 0
        while True:
            free = (await self.direct.rows(text("PRAGMA freelist_count")))[0][0]
            mode = (await self.direct.rows(text("PRAGMA auto_vacuum")))[0][0]
            if not free or mode != 2:  # 2: incremental
                return freed
            await self.direct.write(text(f"PRAGMA incremental_vacuum({RECLAIM_PAGES})"))
            freed += min(int(free), RECLAIM_PAGES)
            await asyncio.sleep(0)


class PostgresRunStore(SqlRunStore):
    """:class:`SqlRunStore` on PostgreSQL, telling other processes what it stores: each batch
    of events notifies ``tg_events`` (per run, its last seq and, when they fit, the events
    themselves) and a cancel request notifies ``tg_control`` — in the transaction that stores
    them. A batch of events of any runs is stored and announced by one statement: alone, it
    needs no ``BEGIN``/``COMMIT`` either."""

    def _stored(self, events: Sequence[BaseEvent], *also: Statement) -> Sequence[Statement]:
        events = self._kept(events)
        if not events:
            return list(also)
        runs: dict[str, list[BaseEvent]] = {}
        for event in events:
            runs.setdefault(event.run_id, []).append(event)
        notes = [  # a run's events come in seq order
            events_note(run, batch[-1].seq, [e.encoded for e in batch])
            for run, batch in runs.items()
        ]
        columns = {
            "run_ids": [e.run_id for e in events],
            "seqs": [e.seq for e in events],
            "types": [_type(e) for e in events],
            "data": [e.encoded for e in events],
        }
        told = {**columns, "now": utcnow(), "channel": EVENTS, "notes": notes}
        return [(_STORE_AND_TELL, told), *also]

    async def request_cancel(self, run_id: str) -> None:
        statement = update(RunRow).where(RunRow.id == run_id).values(cancel_requested=True)
        await self.direct.run([(statement, None), notify_statement(CONTROL, f"cancel:{run_id}")])


_STORE_AND_TELL = text(  # the events inserted (a data-modifying WITH always runs), then told
    "WITH stored AS (INSERT INTO events (run_id, seq, type, data, created_at)"
    " SELECT e.run_id, e.seq, e.type, e.data, :now FROM unnest("
    "CAST(:run_ids AS varchar[]), CAST(:seqs AS integer[]), CAST(:types AS varchar[]),"
    " CAST(:data AS text[])) AS e(run_id, seq, type, data))"
    " SELECT pg_notify(:channel, note) FROM unnest(CAST(:notes AS text[])) AS n(note)"
)


def _detached(row: Row[Any]) -> RunRow:
    """The run of a row read with every column (as if a session had loaded it and closed)."""
    found = RunRow(**row._mapping)
    make_transient_to_detached(found)
    return found


_OWNED_BY_RUN = (  # rows that belong to a run; its own row last
    (EventRow, EventRow.run_id),
    (MessageRow, MessageRow.run_id),
    (TurnResultRow, TurnResultRow.run_id),
    (RunRow, RunRow.id),
)


def _inserted(events: Sequence[BaseEvent]) -> list[Statement]:
    """The insert of ``events`` (none for none)."""
    return [(insert(EventRow), _rows(events))] if events else []


def _rows(events: Sequence[BaseEvent]) -> list[dict[str, Any]]:
    return [{"run_id": e.run_id, "seq": e.seq, "type": _type(e), "data": e.encoded} for e in events]


def _type(event: BaseEvent) -> str:
    return cast(Event, event).type


# --- migrate -----------------------------------------------------------------------------------
# Schema migrations (Alembic), run on start-up and by ``teamgraph db upgrade``.
MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the app tables to ``revision``, all or nothing: a process killed half-way leaves the
    schema as it was (on SQLite too, whose driver runs DDL outside transactions unless one was
    begun explicitly), and concurrent processes upgrade one after the other."""
    async with engine.begin() as conn:
        await conn.run_sync(lambda sync: _upgrade(sync, revision))


def _upgrade(connection: Connection, revision: str) -> None:
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    command.upgrade(alembic_config(connection), revision)
