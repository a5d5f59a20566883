"""Where a run's step ledger and journal (:mod:`teamgraph.durable`) are kept: two tables of a
SQLite file, or a LangGraph ``BaseStore`` (PostgreSQL's).

A write that meets an outage (:mod:`teamgraph.storage.outages`) stops the whole run, resumable,
rather than failing the step that was writing.

In SQLite: ``tg_step_ledger`` (key: run id and step id) and ``tg_journal`` (key: the journal
key, which starts with the run id), written through the file's :class:`LoopFirst` lanes — a
record is committed before the write returns, and the event loop never waits for the lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from langgraph.store.base import BaseStore

from teamgraph.durable import StepRecord, journal_run
from teamgraph.storage.checkpoints import literal_like
from teamgraph.storage.outages import stops_on_outage
from teamgraph.storage.sqlite import LoopFirst, autocommit_lanes

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tg_step_ledger (run_id TEXT NOT NULL, step_id TEXT NOT NULL, "
    "record TEXT NOT NULL, PRIMARY KEY (run_id, step_id))",
    "CREATE TABLE IF NOT EXISTS tg_journal (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


class SqliteRecords:
    """The ledger's and the journal's tables in one SQLite file, on one pair of lanes.
    Opening creates the tables (it may wait for the lock: call it off the event loop)."""

    def __init__(self, path: str | Path) -> None:
        self.lanes: LoopFirst[sqlite3.Connection] = autocommit_lanes(path)
        self.lanes.waiting(lambda conn: [conn.execute(statement) for statement in _SCHEMA])
        self.ledger = SqliteStepLedger(self.lanes)
        self.journal = SqliteJournal(self.lanes)

    def close(self) -> None:
        self.lanes.close()


class SqliteStepLedger:
    """A :class:`~teamgraph.durable.StepLedger` in table ``tg_step_ledger``."""

    def __init__(self, lanes: LoopFirst[sqlite3.Connection]) -> None:
        self.lanes = lanes

    @stops_on_outage
    async def load(self, run_id: str) -> dict[str, StepRecord]:
        query = "SELECT step_id, record FROM tg_step_ledger WHERE run_id = ?"
        rows = await self.lanes.run(lambda conn: conn.execute(query, (run_id,)).fetchall())
        return {step_id: StepRecord.model_validate_json(record) for step_id, record in rows}

    @stops_on_outage
    async def save(self, run_id: str, record: StepRecord) -> None:
        statement = (
            "INSERT OR REPLACE INTO tg_step_ledger (run_id, step_id, record) VALUES (?, ?, ?)"
        )
        values = (run_id, record.step_id, record.model_dump_json())
        await self.lanes.run(lambda conn: conn.execute(statement, values))

    @stops_on_outage
    async def forget(self, run_ids: Sequence[str]) -> None:
        """The runs' records and their nested teams' (keyed ``run_id/…``), in one transaction."""
        statement = "DELETE FROM tg_step_ledger WHERE run_id = ? OR (run_id > ? AND run_id < ?)"
        values = [(run, *_below(run)) for run in run_ids]
        await self.lanes.run(lambda conn: _transaction(conn, statement, values))


class SqliteJournal:
    """A :class:`~teamgraph.durable.JournalStore` in table ``tg_journal``."""

    def __init__(self, lanes: LoopFirst[sqlite3.Connection]) -> None:
        self.lanes = lanes

    @stops_on_outage
    async def recall(self, key: str) -> str | None:
        query = "SELECT value FROM tg_journal WHERE key = ?"
        row = await self.lanes.run(lambda conn: conn.execute(query, (key,)).fetchone())
        return None if row is None else str(row[0])

    @stops_on_outage
    async def record(self, key: str, value: str) -> None:
        statement = "INSERT OR REPLACE INTO tg_journal (key, value) VALUES (?, ?)"
        await self.lanes.run(lambda conn: conn.execute(statement, (key, value)))

    @stops_on_outage
    async def values(self, run_id: str) -> list[str]:
        query = "SELECT value FROM tg_journal WHERE key > ? AND key < ?"  # keys 'run_id/...'
        bounds = (f"{run_id}/", f"{run_id}0")  # '0' follows '/' in every collation
        rows = await self.lanes.run(lambda conn: conn.execute(query, bounds).fetchall())
        return [str(value) for (value,) in rows]

    @stops_on_outage
    async def forget(self, run_ids: Sequence[str]) -> None:
        statement = "DELETE FROM tg_journal WHERE key > ? AND key < ?"
        values = [_below(run) for run in run_ids]
        await self.lanes.run(lambda conn: _transaction(conn, statement, values))


def _below(run_id: str) -> tuple[str, str]:
    """The bounds of keys ``run_id/…`` ('0' follows '/' in every collation of SQLite)."""
    return f"{run_id}/", f"{run_id}0"


def _transaction(conn: sqlite3.Connection, statement: str, values: list[Any]) -> None:
    """``statement`` for each of ``values`` in one transaction of an autocommit connection
    (on the fast lane, ``BEGIN IMMEDIATE`` meets a held lock at once: nothing begun stays)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(statement, values)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class StoreStepLedger:
    """A :class:`~teamgraph.durable.StepLedger` in a LangGraph store, namespace
    ``("teamgraph", "steps", run_id)``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    @stops_on_outage
    async def load(self, run_id: str) -> dict[str, StepRecord]:
        items = await self.store.asearch(("teamgraph", "steps", run_id), limit=100_000)
        return {item.key: StepRecord.model_validate(item.value) for item in items}

    @stops_on_outage
    async def save(self, run_id: str, record: StepRecord) -> None:
        value: dict[str, Any] = record.model_dump(mode="json")
        await self.store.aput(("teamgraph", "steps", run_id), record.step_id, value, index=False)

    @stops_on_outage
    async def forget(self, run_ids: Sequence[str]) -> None:
        """The runs' namespaces and their nested teams' (``("teamgraph", "steps",
        "run_id/…")``), one statement each on the store's table (the store's API deletes one
        known key at a time)."""
        statement = r"DELETE FROM store WHERE prefix = %s OR prefix LIKE %s ESCAPE '\'"
        values = [
            (f"teamgraph.steps.{run}", f"teamgraph.steps.{literal_like(run)}/%") for run in run_ids
        ]
        await _store_statements(self.store, statement, values)


class StoreJournal:
    """A :class:`~teamgraph.durable.JournalStore` in a LangGraph store, namespace
    ``("teamgraph", "journal", run_id)``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    @stops_on_outage
    async def recall(self, key: str) -> str | None:
        item = await self.store.aget(("teamgraph", "journal", journal_run(key)), key)
        return None if item is None else str(item.value["v"])

    @stops_on_outage
    async def record(self, key: str, value: str) -> None:
        namespace = ("teamgraph", "journal", journal_run(key))
        await self.store.aput(namespace, key, {"v": value}, index=False)

    @stops_on_outage
    async def values(self, run_id: str) -> list[str]:
        items = await self.store.asearch(("teamgraph", "journal", run_id), limit=1_000_000)
        return [str(item.value["v"]) for item in items]

    @stops_on_outage
    async def forget(self, run_ids: Sequence[str]) -> None:
        """The runs' namespaces, one statement each on the store's table."""
        statement = "DELETE FROM store WHERE prefix = %s"
        await _store_statements(
            self.store, statement, [(f"teamgraph.journal.{run}",) for run in run_ids]
        )


async def _store_statements(store: BaseStore, statement: str, values: list[Any]) -> None:
    """``statement`` for each of ``values`` on the PostgreSQL store's connections (its table
    ``store``: ``prefix`` is the namespace joined by dots)."""
    if not values:
        return
    pool: Any = cast(Any, store).conn  # AsyncPostgresStore: the pool it was made with
    async with pool.connection() as conn, conn.cursor() as cursor:
        await cursor.executemany(statement, values)
