"""The same runtime on PostgreSQL: checkpoints, store-backed ledger and journal, app tables."""

from __future__ import annotations

from typing import Any

from teamgraph import Plan, Step
from teamgraph.config import Settings
from teamgraph.runtime.team import Team

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
