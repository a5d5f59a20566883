"""A nested team runs on a thread of its own; when it waits for a human (a tool call to approve,
a clarifying question) the whole run pauses, and the reply reaches the nested team on resume."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from teamgraph import Plan, Step
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel

from .helpers import FAST_RETRY, by_type, task_of

deleted: list[str] = []


@tool
def delete_record(record_id: str) -> str:
    """Delete a record."""
    deleted.append(record_id)
    return f"deleted {record_id}"


def _clerk_model() -> FunctionChatModel:
    """Deletes each record its task names ("delete records 1 2"), one call after the other, then
    reports what the tool said."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        records = [w for w in task_of(messages).split() if w.isdigit()]
        if len(done) < len(records):
            record = records[len(done)]
            call = {"name": "delete_record", "args": {"record_id": record}, "id": f"c{record}"}
            return AIMessage(content="", tool_calls=[call])
        return AIMessage(content="; ".join(str(m.content) for m in done) or "nothing to do")

    return FunctionChatModel(fn=respond)


CLERK = {"name": "clerk", "description": "keeps records", "tools": ["delete_record"]}
DESK = {"name": "desk", "description": "the records desk", "members": [CLERK]}


def _team(settings: Any, spec: dict[str, Any]) -> Team:
    spec = {"retry": FAST_RETRY, **spec}
    return Team.from_dict(spec, settings=settings, model=_clerk_model(), tools=[delete_record])


async def test_a_nested_teams_approval_pauses_the_run_with_its_siblings(settings: Any) -> None:
    """A workflow step given to a nested team and one given to an agent both wait for approval:
    the run pauses once, asking for both; approved, each call runs once and both steps finish."""
    deleted.clear()
    team = _team(settings, {"name": "top", "members": [DESK, {**CLERK, "name": "clerk2"}]})
    plan = Plan(
        steps=[
            Step(id="nested", worker="desk", task="delete record 7"),
            Step(id="direct", worker="clerk2", task="delete record 8"),
        ]
    )
    async with team.runner() as runner:
        events = [e async for e in runner.stream("x", run_id="r", plan=plan)]
        assert (await runner.backend.runs.get("r")).status == "interrupted"
        asked = {e.args["record_id"]: e for e in by_type(events, "approval_requested")}
        assert set(asked) == {"7", "8"} and deleted == []
        assert not by_type(events, "step_failed")
        assert {p["args"]["record_id"] for p in await runner.pending("r")} == {"7", "8"}
        [_ async for _ in runner.resume_stream("r", default={"action": "approve"})]
        result = await runner.result("r")
    assert sorted(deleted) == ["7", "8"]
    assert result.status == "completed"
    assert result.step("nested").output == "deleted 7"


async def test_successive_approvals_in_a_nested_team_each_reach_their_call(
    settings: Any,
) -> None:
    """The nested agent asks for one call, then (approved) for the next: the run pauses twice,
    and after the second reply the re-executed step hands the nested team the right decision
    although its thread is already past the first one."""
    deleted.clear()
    team = _team(settings, {"name": "top", "members": [DESK]})
    plan = Plan(steps=[Step(id="s", worker="desk", task="delete records 1 2")])
    async with team.runner() as runner:
        first = [e async for e in runner.stream("x", run_id="r", plan=plan)]
        assert [e.args for e in by_type(first, "approval_requested")] == [{"record_id": "1"}]
        second = [e async for e in runner.resume_stream("r", default={"action": "approve"})]
        assert [e.args for e in by_type(second, "approval_requested")] == [{"record_id": "2"}]
        assert deleted == ["1"]
        reject = {"action": "reject", "comment": "keep it"}
        [_ async for _ in runner.resume_stream("r", default=reject)]
        result = await runner.result("r")
    assert deleted == ["1"]  # each call ran at most once, the rejected one never
    assert result.status == "completed"
    assert result.step("s").output == (
        "deleted 1; The user rejected this call to delete_record: keep it"
    )


async def test_three_levels_down_an_approval_still_pauses_the_run(settings: Any) -> None:
    deleted.clear()
    middle = {"name": "middle", "description": "delegates", "members": [DESK]}
    team = _team(settings, {"name": "top", "members": [middle]})
    plan = Plan(steps=[Step(id="s", worker="middle", task="delete record 3")])
    async with team.runner() as runner:
        events = [e async for e in runner.stream("x", run_id="r", plan=plan)]
        assert [e.args for e in by_type(events, "approval_requested")] == [{"record_id": "3"}]
        [_ async for _ in runner.resume_stream("r", default={"action": "approve"})]
        result = await runner.result("r")
    assert deleted == ["3"] and result.status == "completed"


@pytest.mark.parametrize("pattern", ["workflow", "single"])
async def test_a_nested_teams_question_pauses_the_run_and_gets_the_answer(
    pattern: str, settings: Any
) -> None:
    """A nested team with ``clarify`` given a vague task asks its question through the run."""
    desk = {"name": "desk", "clarify": True, "members": ["researcher", "writer"]}
    spec = {"name": "top", "pattern": pattern, "members": [desk, "analyst"]}
    team = Team.from_dict(spec, settings=settings)
    given = {"plan": Plan(steps=[Step(id="s", worker="desk", task="help")])}
    async with team.runner() as runner:
        events = [
            e
            async for e in runner.stream(
                "help", run_id="c", **given if pattern == "workflow" else {}
            )
        ]
        assert (await runner.backend.runs.get("c")).status == "interrupted"
        assert len(by_type(events, "clarification_requested")) == 1
        assert [p["type"] for p in await runner.pending("c")] == ["clarification"]
        answer = "compare PostgreSQL and MongoDB security"
        resumed = [e async for e in runner.resume_stream("c", answer=answer)]
        result = await runner.result("c")
    assert result.status == "completed"
    nested_plan = [e for e in by_type(resumed, "plan_created") if e.path == ["top", "desk"]]
    assert any("PostgreSQL" in step["task"] for step in nested_plan[0].steps)


async def test_a_nested_team_keeps_its_checkpoints_on_its_own_thread(settings: Any) -> None:
    """Nothing of the nested team is stored in the run's thread: its graph runs on a thread
    named after the run's, the step and the team."""
    desk = {"name": "desk", "description": "writes", "members": ["writer"]}
    team = Team.from_dict({"name": "top", "members": [desk]}, settings=settings)
    plan = Plan(steps=[Step(id="s", worker="desk", task="Write about PostgreSQL")])
    result = await team.run("x", run_id="r", thread_id="t", plan=plan)
    assert result.status == "completed"
    path = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints").fetchall()
    assert ("t", "") in rows
    nested = [thread for thread, ns in rows if thread != "t"]
    assert all(ns == "" for _, ns in rows)  # no subgraph namespace anywhere
    assert len(nested) == 1 and nested[0].startswith("t/r/") and nested[0].endswith("/s/desk")
