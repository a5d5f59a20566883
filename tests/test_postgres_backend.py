"""The same runtime on PostgreSQL: checkpoints, store-backed ledger and journal, app tables."""

from __future__ import annotations

from typing import Any

from teamgraph import Plan, Step
from teamgraph.config import Settings
from teamgraph.runtime.team import Team

from .conftest import PG_ADMIN
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
