"""The same runtime on PostgreSQL: checkpoints, store-backed ledger and journal, app tables."""

from __future__ import annotations

import asyncio
from typing import Any

from teamgraph import DatabaseUnavailable, Plan, Step
from teamgraph.config import Settings
from teamgraph.llm.offline import OfflineChatModel
from teamgraph.runtime.team_api import Team

from .conftest import PG_ADMIN
from .faultkit import REQUEST
from .faultproxy import FaultProxy
from .test_approvals import _model, delete_record, executed


async def test_offline_workflow_and_resume_on_postgres(pg_url: str) -> None:
    settings = Settings(database_url=pg_url)
    team = Team.from_dict({"name": "pg", "members": ["researcher", "writer"]}, settings=settings)
    result = await team.run("Compare PostgreSQL and MongoDB on security and cost")
    assert result.status == "completed" and result.planner_tier == "rules"
    assert len(result.steps) == 3 and all(s.status == "done" for s in result.steps)


async def test_approval_pause_and_resume_on_postgres(pg_url: str) -> None:
    executed.clear()
    spec: dict[str, Any] = {
        "name": "t",
        "members": [{"name": "clerk", "description": "keeps records", "tools": ["delete_record"]}],
    }
    team = Team.from_dict(
        spec, settings=Settings(database_url=pg_url), model=_model(), tools=[delete_record]
    )
    plan = Plan(steps=[Step(id="s1", worker="clerk", task="delete record 1")])
    async with team.runner() as runner:
        _ = [e async for e in runner.stream("x", run_id="pg-run", plan=plan)]
        assert (await runner.backend.runs.get("pg-run")).status == "interrupted"
        _ = [e async for e in runner.resume_stream("pg-run", default={"action": "approve"})]
        result = await runner.result("pg-run")
    assert executed == ["1"] and result.step("s1").output == "result: deleted 1"


def _terminate_connections(url: str) -> int:
    """End every connection to the database at ``url`` (as a restart or an operator would);
    the number ended. Other databases' connections are left alone."""
    import psycopg

    database = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchone()
    return int(ended[0]) if ended else 0


async def test_runs_go_on_after_every_connection_to_the_database_was_ended(pg_url: str) -> None:
    settings = Settings(database_url=pg_url)
    team = Team.from_dict({"name": "pg", "members": ["researcher", "writer"]}, settings=settings)
    async with team.runner() as runner:
        first = await runner.run("Compare PostgreSQL and MongoDB on security", run_id="before")
        assert _terminate_connections(pg_url) >= 2  # the checkpointer's, the app tables', ...
        second = await runner.run("Compare PostgreSQL and MongoDB on cost", run_id="after")
        again = await runner.result("before")  # old runs read back: the store reconnected
    assert first.status == second.status == "completed"
    assert again.output == first.output and again.steps


async def test_a_run_whose_connections_are_cut_mid_query_completes_redoing_no_step(
    pg_url: str,
) -> None:
    """The database stalls, then every connection is cut while queries wait on it (a restart,
    as clients see it): the run completes — in place when its next query finds a fresh
    connection, or by a resume when a query was cut (``DatabaseUnavailable``: nothing was
    marked failed) — and no finished step is run again."""
    proxy = FaultProxy(("127.0.0.1", 5432))
    await proxy.start()
    settings = Settings(database_url=proxy.url(pg_url.rsplit("/", 1)[1]))
    team = Team.from_dict(
        {"name": "pg", "members": ["researcher", "writer"]},
        settings=settings,
        model=OfflineChatModel(latency=0.05),
    )
    events: list[Any] = []
    stops = 0
    try:
        async with team.runner() as runner:
            stream = runner.stream(REQUEST, run_id="cut")
            while True:
                try:
                    async for event in stream:
                        events.append(event)
                        if event.type == "step_completed" and not proxy.cut:
                            asyncio.get_running_loop().call_later(0.3, proxy.reset)
                            proxy.stall(0.3)  # queries wait, then their connections are cut
                    break
                except DatabaseUnavailable:
                    stops += 1
                    row = await _eventually(lambda: runner.backend.runs.get("cut"))
                    assert row.status == "running"  # stopped where it was, not failed
                    stream = runner.resume_stream("cut")
            result = await runner.result("cut")
    finally:
        await proxy.stop()
    assert result.status == "completed" and proxy.cut >= 1 and stops <= 1
    completed = [e.step_id for e in events if e.type == "step_completed"]
    assert sorted(completed) == sorted(set(completed))  # no finished step ran twice
    assert {s.id for s in result.steps} == set(completed)


async def _eventually(read: Any, within_s: float = 30.0) -> Any:
    """``read()`` once the database answers again (the outage is over)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        try:
            return await read()
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_an_idle_pooled_connection_is_lent_unchecked_until_the_database_ends_it(
    pg_url: str,
) -> None:
    """Pools lend a connection without a query (a round trip per lend) unless it may be dead:
    a live idle one is not suspect; once the server ends it, it is (and is then checked)."""
    import psycopg

    from teamgraph.storage.outages import disturbed

    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    try:
        await conn.execute("SELECT 1")
        assert not disturbed(conn)
        assert _terminate_connections(pg_url) == 1
        for _ in range(100):  # the server's goodbye arrives soon after
            if disturbed(conn):
                break
            await asyncio.sleep(0.05)
        assert disturbed(conn)
    finally:
        await conn.close()
    assert disturbed(conn)  # closed


async def test_the_app_tables_pool_replaces_connections_the_database_ended(pg_url: str) -> None:
    """SQLAlchemy's pool lends without a ping; a pooled connection the server ended is replaced,
    not used: no read fails after every connection was ended."""
    from sqlalchemy import event

    from teamgraph.runtime.backend import open_backend

    async with open_backend(Settings(database_url=pg_url)) as backend:
        failed: list[Any] = []  # statements that met a dead connection (none)
        event.listen(backend.engine.sync_engine, "handle_error", lambda c: failed.append(c))
        reads = [backend.runs.count_by_status() for _ in range(4)]
        await asyncio.gather(*reads)  # several connections idle in the pool
        assert _terminate_connections(pg_url) >= 1
        for _ in range(200):  # until every backend is gone: each sent its goodbye first
            if not _connections(pg_url):
                break
            await asyncio.sleep(0.05)
        for _ in range(8):
            assert await backend.runs.count_by_status() == {}
        assert failed == []  # replaced when lent, not found dead by a statement (and retried)


def _connections(url: str) -> int:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (url.rsplit("/", 1)[1],),
        ).fetchone()
    return int(row[0]) if row else 0
