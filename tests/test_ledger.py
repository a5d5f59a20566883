from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from teamgraph import Plan, Step
from teamgraph.durable import FirstExecution, StepRecord
from teamgraph.storage.run_records import SqliteRecords
from teamgraph.testing import FunctionChatModel

from .helpers import task_of, waits_for_the_lock_without_blocking, workflow_team


def _record(step_id: str, task: str = "t", output: str = "out") -> StepRecord:
    return StepRecord(step_id=step_id, worker="researcher", task=task, status="done", output=output)


async def test_saved_records_survive_reopening(tmp_path: Path) -> None:
    records = SqliteRecords(tmp_path / "l.db")
    await records.ledger.save("run", _record("a"))
    await records.ledger.save("run", _record("a", output="newer"))
    await records.ledger.save("other", _record("b"))
    await records.journal.record("run/x/m1", "reply")
    records.close()
    reopened = SqliteRecords(tmp_path / "l.db")
    assert {k: r.output for k, r in (await reopened.ledger.load("run")).items()} == {"a": "newer"}
    assert await reopened.journal.values("run") == ["reply"]
    assert await reopened.journal.values("other") == []
    reopened.close()


async def test_a_first_execution_reads_back_what_it_wrote_and_writes_through(
    tmp_path: Path,
) -> None:
    """A new run's execution finds in the journal and ledger only what it wrote (it does not
    read the stores for anything else); every write reaches the stores, where a resume reads
    it; a write the store refused is not remembered."""
    records = SqliteRecords(tmp_path / "l.db")
    first = FirstExecution(records.journal, records.ledger)
    await records.journal.record("run/x/elsewhere", "not this execution's")
    await records.ledger.save("run", _record("z"))
    assert await first.journal.recall("run/x/elsewhere") is None  # never read
    assert await first.journal.recall("run/x/m1") is None
    assert await first.ledger.load("run") == {}
    await first.journal.record("run/x/m1", "reply")
    await first.ledger.save("run", _record("a"))
    await first.ledger.save("run/s1/team", _record("n"))  # a nested team's scope
    assert await first.journal.recall("run/x/m1") == "reply"
    assert list(await first.ledger.load("run")) == ["a"]
    assert list(await first.ledger.load("run/s1/team")) == ["n"]
    assert await records.journal.recall("run/x/m1") == "reply"  # what a resume reads
    assert sorted(await records.ledger.load("run")) == ["a", "z"]
    records.close()
    with pytest.raises(sqlite3.ProgrammingError):  # the store is closed: refused
        await first.journal.record("run/x/m2", "lost")
    assert await first.journal.recall("run/x/m2") is None


async def test_a_locked_database_never_blocks_the_event_loop(tmp_path: Path) -> None:
    records = SqliteRecords(tmp_path / "l.db")
    saving = records.ledger.save("run", _record("a"))
    await waits_for_the_lock_without_blocking(tmp_path / "l.db", saving)
    assert list(await records.ledger.load("run")) == ["a"]
    records.close()


async def test_a_changed_step_is_not_taken_from_the_ledger(settings: Any) -> None:
    calls: list[str] = []

    def fn(messages: list[Any]) -> str:
        calls.append(task_of(messages))
        return f"answer to {task_of(messages)}"

    team = workflow_team(settings, FunctionChatModel(fn=fn))
    async with team.runner() as runner:
        await runner.ledger.save("r", _record("a", task="an older task", output="stale"))
        plan = Plan(steps=[Step(id="a", worker="researcher", task="the current task")])
        result = await runner.run("x", run_id="r", plan=plan)
    assert calls == ["the current task"]
    assert result.step("a").output == "answer to the current task"
