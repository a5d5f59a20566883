"""A database that cannot be reached stops a run where it is — resumable, not failed — and the
errors that mean "unreachable" are told apart from every other database error."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from teamgraph import DatabaseUnavailable
from teamgraph.runtime.team_api import Team
from teamgraph.storage.outages import is_outage

from .faultkit import REQUEST, LockedOnce


async def test_a_run_that_cannot_write_stops_resumable_and_its_resume_redoes_nothing(
    settings: Any,
) -> None:
    team = Team.from_dict({"name": "t", "members": ["researcher", "writer"]}, settings=settings)
    async with team.runner() as runner:
        journal = runner.backend.journal
        journal.lanes = LockedOnce(journal.lanes, n=12)  # type: ignore[attr-defined]
        seen: list[Any] = []
        with pytest.raises(DatabaseUnavailable, match="resumes from its last checkpoint"):
            async for event in runner.stream(REQUEST, run_id="r"):
                seen.append(event)
        row = await runner.backend.runs.get("r")
        assert row.status == "running" and not [e for e in seen if e.type == "run_failed"]
        resumed = [e async for e in runner.resume_stream("r")]
        result = await runner.result("r")
    assert result.status == "completed"
    done_before = {e.step_id for e in seen if e.type == "step_completed"}
    again = {e.step_id for e in resumed if e.type == "step_started"}
    assert not done_before & again
    assert resumed[-1].type == "run_completed"


def test_only_a_database_s_unreachability_counts_as_an_outage() -> None:
    psycopg = pytest.importorskip("psycopg")
    from psycopg import errors
    from psycopg_pool import PoolTimeout
    from sqlalchemy.exc import OperationalError as Wrapped

    assert is_outage(psycopg.OperationalError("the connection is closed"))
    assert is_outage(errors.AdminShutdown("terminating connection due to administrator command"))
    assert is_outage(Wrapped("SELECT 1", {}, errors.ConnectionFailure("gone")))
    assert is_outage(PoolTimeout("couldn't get a connection after 30.00 sec"))
    assert is_outage(sqlite3.OperationalError("database is locked"))
    assert is_outage(sqlite3.OperationalError("database or disk is full"))
    try:
        raise RuntimeError("a run stopped") from errors.CannotConnectNow("starting up")
    except RuntimeError as wrapped:
        assert is_outage(wrapped)
    assert not is_outage(errors.UniqueViolation("duplicate key"))
    assert not is_outage(errors.QueryCanceled("statement timeout"))
    assert not is_outage(sqlite3.OperationalError("no such table: runs"))
    assert not is_outage(ConnectionRefusedError("a model provider is down, not the database"))


async def test_an_outage_met_purges_the_registered_pools_once_at_a_time() -> None:
    """Where an outage is met, the pools registered drop their dead connections at once (a
    pool's ``check()``), not one borrower at a time; a second outage met at once adds none."""
    import asyncio

    from teamgraph.storage import outages

    purged: list[int] = []

    async def purge() -> None:
        purged.append(1)

    outages._last_purge = 0.0  # no purge before this test's
    with outages.purged_on_outage(purge):
        outages.outage_met()
        outages.outage_met()
        await asyncio.sleep(0)
        assert purged == [1]
    outages._last_purge = 0.0
    outages.outage_met()  # unregistered: nothing runs
    await asyncio.sleep(0)
    assert purged == [1]
