"""Code that calls a tool needing approval: the step pauses before it completes, and after the
approval the call runs exactly once and the code gets its result — also when the process is
killed at any durability boundary on the way (real child processes, ``os._exit``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool

from teamgraph import Plan, Step
from teamgraph.config import Settings
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel

from . import faultkit
from .counting_tools import charge_card
from .helpers import by_type

CODE = (
    "```python\n"
    "note = look_up(customer='42')\n"
    "receipt = charge_card(customer='42')\n"
    "print(note, '|', receipt)\n"
    "```"
)
PLAN = Plan(steps=[Step(id="pay", worker="cashier", task="charge customer 42")])


@tool
def look_up(customer: str) -> str:
    """Look a customer up (counted in the same file as charges, as 'look_up')."""
    with Path(os.environ["TG_COUNTER_FILE"]).open("a") as handle:
        handle.write("look_up\n")
    return f"customer {customer} is in good standing"


def _cashier(messages: list[BaseMessage]) -> str:
    """Writes the code once; then answers with what the code printed."""
    results = [m for m in messages if isinstance(m, HumanMessage) and "Execution" in m.text]
    return CODE if not results else f"Done. {results[-1].text}"


def _till(db: str) -> Team:
    spec = {
        "name": "till",
        "members": [
            {
                "name": "cashier",
                "description": "charges cards by writing code",
                "kind": "codeact",
                "tools": ["look_up", "charge_card"],
            }
        ],
    }
    settings = Settings(database_url=db)
    model = FunctionChatModel(fn=_cashier)
    return Team.from_dict(spec, settings=settings, model=model, tools=[look_up, charge_card])


def _charges(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "charges.txt"
    monkeypatch.setenv("TG_COUNTER_FILE", str(path))
    return path


async def test_the_step_pauses_before_it_completes_and_the_approved_call_runs_once(
    tmp_path: Path, counter: Path
) -> None:
    async with _till(f"sqlite:///{tmp_path}/t.db").runner() as runner:
        first = [e async for e in runner.stream("x", run_id="r", plan=PLAN)]
        assert [e.tool for e in by_type(first, "approval_requested")] == ["charge_card"]
        assert not by_type(first, "step_completed")  # paused before the step completed
        assert _charges(counter) == ["look_up"]  # the call before it ran; the charge did not
        then = [e async for e in runner.resume_stream("r", default={"action": "approve"})]
        result = await runner.result("r")
    assert result.status == "completed"
    assert _charges(counter) == ["look_up", "42"]  # each exactly once, across both executions
    output = result.step("pay").output
    assert "good standing | charged the card of customer 42" in output  # the code got it
    returned = [(e.tool, e.is_error) for e in by_type(first + then, "tool_returned")]
    assert returned == [("look_up", False), ("charge_card", False), ("python", False)]
    assert len(by_type(first + then, "tool_called")) == 3  # python, look_up, charge_card: once


async def test_a_rejected_call_is_an_error_the_code_sees(tmp_path: Path, counter: Path) -> None:
    async with _till(f"sqlite:///{tmp_path}/t.db").runner() as runner:
        await asyncio.gather(*[_drain(runner.stream("x", run_id="r", plan=PLAN))])
        reply = {"action": "reject", "comment": "not today"}
        await _drain(runner.resume_stream("r", default=reply))
        result = await runner.result("r")
    assert result.status == "completed"
    assert _charges(counter) == ["look_up"]
    assert "The user rejected this call to charge_card: not today" in result.step("pay").output


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


# --- the same path, killed at every boundary ----------------------------------------------------
async def start_paused(case: faultkit.Case) -> None:
    async with _till(case.db).runner() as runner:
        await _write(case, "start", runner.stream("x", run_id=case.run_id, plan=PLAN))


async def approve(case: faultkit.Case, phase: str) -> None:
    async with _till(case.db).runner() as runner:
        reply = {"default": {"action": "approve"}} if phase == "approve" else {}
        await _write(case, phase, runner.resume_stream(case.run_id, **reply))


async def _write(case: faultkit.Case, phase: str, events: Any) -> None:
    os.environ["TG_COUNTER_FILE"] = str(case.path("charges.txt"))
    with case.path(f"{phase}.jsonl").open("a", encoding="utf-8") as out:
        async for event in events:
            out.write(event.model_dump_json() + "\n")
            out.flush()


def _case(tmp_path: Path) -> faultkit.Case:
    db = f"sqlite:///{tmp_path}/t.db"
    return faultkit.Case(team="", db=db, folder=str(tmp_path), run_id="r")


@pytest.mark.parametrize(
    "crash",
    [
        "tool.done:1",  # the charge ran; its result not yet journalled
        "tool.journaled:1",  # ... journalled
        "tool.done:2",  # the code ended; its result not yet journalled
        "tool.journaled:2",  # ... journalled
        "model.done:1",  # the answer written from the code's output, not yet journalled
        "checkpoint.before:1",  # the step's node done, its checkpoint not yet written
    ],
)
def test_an_approved_call_from_code_runs_once_whatever_the_crash(
    tmp_path: Path, crash: str
) -> None:
    case = _case(tmp_path)
    assert faultkit.in_child(start_paused, case) == 0, _err(case)
    assert _charges(case.path("charges.txt")) == ["look_up"]
    crashed = faultkit.in_child(approve, case, crash, "approve")
    assert crashed == faultkit.faults.CRASH_EXIT_CODE, f"did not crash at {crash}: {_err(case)}"
    assert faultkit.in_child(approve, case, "", "resume") == 0, _err(case)
    assert _charges(case.path("charges.txt")) == ["look_up", "42"]  # never twice, never lost
    events = case.events("start") + case.events("approve") + case.events("resume")
    assert [e["type"] for e in events].count("run_completed") == 1
    output = next(e for e in events if e["type"] == "run_completed")["output"]
    if crash == "tool.done:1":  # the charge ran but its result was lost: said, not redone
        assert "started before the process stopped" in output
    else:
        assert "charged the card of customer 42" in output
    calls = [e["tool"] for e in events if e["type"] == "tool_called"]
    assert sorted(calls) == ["charge_card", "look_up", "python"]  # each announced once


def _err(case: faultkit.Case) -> str:
    path = case.path("child.err")
    return path.read_text() if path.exists() else json.dumps(case.events("start"))[:2000]
