"""What a run keeps once it ended (compaction) and for how long (retention), on SQLite and
PostgreSQL: a compacted run reads the same; a pruned run leaves no row behind anywhere; live and
paused runs are untouched."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, update

from teamgraph import Settings
from teamgraph.errors import UsageError
from teamgraph.plan import Plan, Step
from teamgraph.result import describe
from teamgraph.runtime.retention import compact, parse_age, prune, pruning
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team_api import Team
from teamgraph.storage.models import MessageRow, RunRow, SessionRow, UserRow, utcnow

from .helpers import desk_team, eventually

REQUEST = "Compare PostgreSQL and MongoDB on cost"
NESTED = {"name": "top", "members": [{"name": "desk", "description": "w", "members": ["writer"]}]}


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/runs.db"
    else:
        url = request.getfixturevalue("pg_url")
    return Settings(database_url=url, knowledge_path=tmp_path / "k.db")


@pytest.fixture
async def runner(settings: Settings) -> AsyncIterator[Runner]:
    async with desk_team(settings).runner() as opened:
        yield opened


async def run(runner: Runner, request: str, run_id: str, **options: Any) -> str:
    async for _ in runner.stream(request, run_id=run_id, **options):
        pass
    return str((await runner.backend.runs.get(run_id)).status)


async def checkpoints(runner: Runner, thread_id: str) -> int:
    """How many checkpoints the thread's busiest namespace holds (a team's moderator runs it as
    a subgraph: a namespace of its own)."""
    config = runner.thread_config(thread_id)
    saved = runner.backend.checkpointer.alist(config)
    found = [c.config["configurable"]["checkpoint_ns"] async for c in saved]
    return max((found.count(ns) for ns in found), default=0)


# --- compaction ---------------------------------------------------------------------------------
async def test_a_completed_run_keeps_its_latest_checkpoint_and_reads_the_same(
    settings: Settings, runner: Runner
) -> None:
    whole = desk_team(settings.model_copy(update={"compact_runs": False}))
    async with whole.runner() as kept_runner:
        assert await run(kept_runner, REQUEST, "kept") == "completed"
        kept = await kept_runner.result("kept")
    assert await run(runner, REQUEST, "done") == "completed"
    done = await runner.result("done")

    assert await checkpoints(runner, "kept") > 1 and await runner.backend.journal.values("kept")
    assert await checkpoints(runner, "done") == 1
    assert await runner.backend.journal.values("done") == []
    assert await runner.ledger.load("done")  # step results: what `diff` and the result show
    assert describe(done) == describe(kept)  # the same run, as every reader sees it
    assert done.output and done.usage == kept.usage


async def test_a_run_that_ends_in_an_outage_is_compacted_once_the_database_answers(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver, failures = runner.backend.checkpointer, [0]
    pruning_ = saver.aprune

    async def aprune(threads: Any, **options: Any) -> None:
        if failures[0] < 2:  # the database does not answer the first two tries
            failures[0] += 1
            raise sqlite3.OperationalError("database is locked")
        await pruning_(threads, **options)

    monkeypatch.setattr(saver, "aprune", aprune)
    assert await run(runner, REQUEST, "late") == "completed"  # compacted as it ends
    assert failures == [2] and await checkpoints(runner, "late") == 1
    assert await runner.backend.journal.values("late") == []


async def test_a_paused_run_keeps_everything_and_resumes(runner: Runner) -> None:
    assert await run(runner, "help me", "paused") == "interrupted"
    before = await checkpoints(runner, "paused")
    assert await run(runner, REQUEST, "other") == "completed"  # compacts its own thread only
    assert await checkpoints(runner, "paused") == before
    async for _ in runner.resume_stream("paused", answer="compare PostgreSQL and MongoDB"):
        pass
    assert (await runner.result("paused")).status == "completed"


async def test_a_cancelled_run_keeps_its_journal_and_stays_resumable(
    settings: Settings, runner: Runner
) -> None:
    assert await run(runner, "help me", "c") == "interrupted"
    journal = await runner.backend.journal.values("c")
    assert journal and await checkpoints(runner, "c") > 1
    await runner.backend.runs.cancel_stored("c", "cancelled while paused")
    await compact(runner.backend, settings, "c", "c", "cancelled")
    assert await checkpoints(runner, "c") == 1
    assert await runner.backend.journal.values("c") == journal  # replayed and counted on resume
    async for _ in runner.resume_stream("c", answer="compare PostgreSQL and MongoDB"):
        pass
    assert (await runner.result("c")).status == "completed"


# --- retention ----------------------------------------------------------------------------------
async def test_prune_removes_old_runs_whole_and_leaves_live_ones(
    settings: Settings, runner: Runner
) -> None:
    backend = runner.backend
    assert await run(runner, REQUEST, "old") == "completed"
    assert await run(runner, REQUEST, "old-in-session", thread_id="S") == "completed"
    assert await run(runner, "help me", "live", thread_id="S") == "interrupted"  # same session
    assert await run(runner, "help me", "old-paused") == "interrupted"
    assert await run(runner, REQUEST, "new") == "completed"
    async with Team.from_dict(NESTED, settings=settings).runner() as top:
        plan = Plan(steps=[Step(id="s", worker="desk", task="Write about PostgreSQL")])
        assert await run(top, "x", "old-nested", plan=plan) == "completed"
    await _messages(backend, ["old", "new"])
    old = ["old", "old-in-session", "old-paused", "old-nested"]
    await backend.direct.write(
        update(RunRow).where(RunRow.id.in_(old)).values(updated_at=utcnow() - timedelta(days=40))
    )
    assert await _threads(settings) >= {"old", "S", "old-nested", "old-paused", "new"}

    dry = await prune(backend, timedelta(days=30), dry_run=True)
    assert dry.runs == 3 and len(await backend.runs.list()) == 6

    pruned = await prune(backend, timedelta(days=30), batch=2)  # two batches
    assert pruned.runs == 3 and sorted(pruned.run_ids) == ["old", "old-in-session", "old-nested"]
    kept = {"live", "old-paused", "new"}  # paused runs stay unless named
    assert {r.id for r in await backend.runs.list()} == kept
    assert await _owners(settings) <= kept  # no row of a removed run anywhere
    assert await _threads(settings) == {"S", "old-paused", "new"}  # the session's goes on
    if not settings.is_postgres:
        assert pruned.pages > 0  # the file gave the space back

    async for _ in runner.resume_stream("live", answer="compare PostgreSQL and MongoDB"):
        pass
    assert (await runner.result("live")).status == "completed"
    paused = await prune(backend, timedelta(days=30), ["interrupted"])
    assert paused.run_ids == ["old-paused"] and await _threads(settings) == {"S", "new"}


async def test_the_servers_retention_setting_prunes_while_it_runs(
    settings: Settings, runner: Runner
) -> None:
    assert await run(runner, REQUEST, "old") == "completed"
    assert await run(runner, REQUEST, "new") == "completed"
    aged = utcnow() - timedelta(days=40)
    await runner.backend.direct.write(
        update(RunRow).where(RunRow.id == "old").values(updated_at=aged)
    )
    retaining = settings.model_copy(update={"retention_days": 30})

    async def gone() -> bool:
        return [r.id for r in await runner.backend.runs.list()] == ["new"]

    async with pruning(runner.backend, retaining):
        await eventually(gone, "the old run removed")


async def test_prune_refuses_live_statuses_and_bad_ages(runner: Runner) -> None:
    with pytest.raises(UsageError, match="never pruned"):
        await prune(runner.backend, timedelta(days=1), ["running"])
    with pytest.raises(UsageError, match="positive"):
        await prune(runner.backend, timedelta(0))
    assert parse_age("30d") == timedelta(days=30) and parse_age("90m") == timedelta(minutes=90)
    for bad in ("30", "d", "-3d", "3w"):
        with pytest.raises(UsageError, match=r"e\.g\. 30d"):
            parse_age(bad)


# --- what the tables hold -----------------------------------------------------------------------
async def _messages(backend: Any, run_ids: list[str]) -> None:
    """A user, a session and a message per run (as the server stores them)."""
    await backend.direct.run(
        [
            (insert(UserRow), {"id": "u", "email": "u@example.com", "password_hash": "x"}),
            (insert(SessionRow), {"id": "S", "user_id": "u", "team": "desk"}),
            *[
                (
                    insert(MessageRow),
                    {"session_id": "S", "role": "user", "content": "hi", "run_id": r},
                )
                for r in run_ids
            ],
        ]
    )


async def _owners(settings: Settings) -> set[str]:
    """Every run id any table of a run's records holds (nested teams' keys: their run's)."""
    queries = [
        "SELECT run_id FROM events",
        "SELECT run_id FROM messages",
        "SELECT id FROM runs",
    ]
    if settings.is_postgres:
        queries.append("SELECT split_part(split_part(prefix, '.', 3), '/', 1) FROM store")
    else:
        queries += ["SELECT substr(key, 1, instr(key, '/') - 1) FROM tg_journal"]
        queries += ["SELECT run_id FROM tg_step_ledger"]
    found = {str(row[0]).split("/")[0] for query in queries for row in _rows(settings, query)}
    return found - {"notes"}


async def _threads(settings: Settings) -> set[str]:
    """The runs' threads with checkpoints or writes (a nested team's: its run's)."""
    tables = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    if not settings.is_postgres:
        tables = ("checkpoints", "writes")
    rows = [row for table in tables for row in _rows(settings, f"SELECT thread_id FROM {table}")]
    return {str(row[0]).split("/")[0] for row in rows}


def _rows(settings: Settings, query: str) -> list[Any]:
    if settings.is_postgres:
        import psycopg

        with psycopg.connect(settings.postgres_url) as conn:
            return conn.execute(query).fetchall()  # type: ignore[arg-type]
    with sqlite3.connect(settings.sqlite_path) as conn:
        return conn.execute(query).fetchall()
