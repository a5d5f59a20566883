"""A run killed with SIGKILL mid-flight, then ``teamgraph resume``: real processes, real database.

One crash and one resume (module fixture) feed every test below. The team's offline model sleeps
0.4 s per call and runs two steps at a time: the kill is sent once two steps have completed and
the third has started (it is in flight, ``summary`` waits for it), i.e. in the middle of the run.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

import pytest
from typer.testing import CliRunner

import teamgraph.cli
from teamgraph.cli import app
from teamgraph.events import (
    BaseEvent,
    PlanCreated,
    Resumed,
    RunCompleted,
    RunStarted,
    StepCompleted,
    StepStarted,
    UsageRecorded,
    event_from_json,
)

from .helpers import PROCESS_CEILING_S

REPO = Path(__file__).resolve().parents[1]
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"
PLAN_STEPS = ["research_performance", "research_security", "research_cost", "summary"]
KILL_AFTER_COMPLETED = 2
PHASE_TIMEOUT_S = PROCESS_CEILING_S
SCRUBBED_ENV = (
    "DATABASE_URL",
    "TEAMGRAPH_DATABASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "TEAMGRAPH_DEFAULT_MODEL",
)
E = TypeVar("E", bound=BaseEvent)


def teamgraph_command() -> list[str]:
    """``python -m teamgraph.cli`` if the module runs as a script, else the console script."""
    if 'if __name__ == "__main__":' in Path(teamgraph.cli.__file__).read_text(encoding="utf-8"):
        return [sys.executable, "-m", "teamgraph.cli"]
    script = Path(sys.executable).with_name("teamgraph")
    found = str(script) if script.exists() else shutil.which("teamgraph")
    assert found, "neither `python -m teamgraph.cli` nor a `teamgraph` console script is usable"
    return [found]


def of_type(events: list[BaseEvent], cls: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, cls)]


@dataclass
class Crash:
    db: str
    returncode: int
    before: list[BaseEvent]  # every complete event line the killed process wrote
    completed_when_killed: list[str]  # step ids seen completed before the kill was sent
    in_flight_when_killed: set[str]  # step ids seen started, not completed, before the kill
    resume_rc: int
    resume_stderr: str
    after: list[BaseEvent] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.before[0].run_id

    @property
    def resumed(self) -> Resumed:
        found = of_type(self.after, Resumed)
        assert len(found) == 1, [e.type for e in self.after]
        return found[0]

    @property
    def final(self) -> RunCompleted:
        last = self.after[-1]
        assert isinstance(last, RunCompleted), last
        return last


def _in_flight(events: list[BaseEvent]) -> set[str]:
    """Steps that started and have not completed yet."""
    done = {e.step_id for e in of_type(events, StepCompleted)}
    return {e.step_id for e in of_type(events, StepStarted)} - done


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _crash_and_resume(tmp: Path) -> Crash:
    team = tmp / "team.yaml"
    team.write_text(
        "name: research\n"
        "model: offline\n"
        "model_kwargs: {latency: 0.4}\n"
        f"knowledge: [{REPO / 'examples' / 'knowledge'}]\n"
        "members: [researcher, analyst, writer, critic]\n"
        "workflow: {max_parallel: 2, synthesizer: concat}\n",
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp}/crash.db"
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    command = teamgraph_command()

    with (tmp / "run.stderr").open("w") as stderr:
        proc = subprocess.Popen(
            [*command, "run", "--team", str(team), "--events", "jsonl", "--db", db, REQUEST],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        before: list[BaseEvent] = []
        completed: list[str] = []
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        try:
            while len(completed) < KILL_AFTER_COMPLETED or not _in_flight(before):
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
                if line is None:
                    pytest.fail(
                        f"the run ended before the crash point; events: "
                        f"{[e.type for e in before]}; stderr: "
                        f"{(tmp / 'run.stderr').read_text()}"
                    )
                event = event_from_json(line)
                before.append(event)
                if isinstance(event, StepCompleted):
                    completed.append(event.step_id)
            in_flight = _in_flight(before)
            proc.send_signal(signal.SIGKILL)
            returncode = proc.wait(timeout=10)
        except queue.Empty:
            pytest.fail(
                f"no {KILL_AFTER_COMPLETED} completed steps and one in flight within "
                f"{PHASE_TIMEOUT_S}s: {[e.type for e in before]}"
            )
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(timeout=10)
    while (line := lines.get_nowait()) is not None:
        if line.endswith("\n"):  # a line cut by the kill is not an event the run wrote
            before.append(event_from_json(line))

    resumed = subprocess.run(
        [*command, "resume", before[0].run_id, "--events", "jsonl", "--db", db],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=PHASE_TIMEOUT_S,
    )
    return Crash(
        db=db,
        returncode=returncode,
        before=before,
        completed_when_killed=completed,
        in_flight_when_killed=in_flight,
        resume_rc=resumed.returncode,
        resume_stderr=resumed.stderr,
        after=[event_from_json(x) for x in resumed.stdout.splitlines()],
    )


@pytest.fixture(scope="module")
def crash(tmp_path_factory: pytest.TempPathFactory) -> Crash:
    return _crash_and_resume(tmp_path_factory.mktemp("crash"))


def test_the_run_was_killed_in_the_middle(crash: Crash) -> None:
    assert crash.returncode == -signal.SIGKILL
    assert isinstance(crash.before[0], RunStarted)
    (plan,) = of_type(crash.before, PlanCreated)
    assert [s["id"] for s in plan.steps] == PLAN_STEPS
    assert len(set(crash.completed_when_killed)) >= KILL_AFTER_COMPLETED
    assert crash.in_flight_when_killed
    assert not of_type(crash.before, RunCompleted)
    finished = {e.step_id for e in of_type(crash.before, StepCompleted)}
    assert "summary" not in finished  # the resume has work left to do


def test_resume_succeeds(crash: Crash) -> None:
    assert crash.resume_rc == 0, crash.resume_stderr
    assert crash.final.run_id == crash.run_id
    assert crash.final.status == "completed"


def test_resume_announces_the_steps_finished_before_the_crash(crash: Crash) -> None:
    assert isinstance(crash.after[0], Resumed)
    done = set(crash.resumed.completed_steps)
    assert set(crash.completed_when_killed) <= done
    assert {e.step_id for e in of_type(crash.before, StepCompleted)} <= done
    assert done < set(PLAN_STEPS)


def test_resume_reruns_no_finished_step(crash: Crash) -> None:
    restarted = {e.step_id for e in of_type(crash.after, StepStarted)}
    assert not restarted & set(crash.completed_when_killed)
    assert not restarted & set(crash.resumed.completed_steps)


def test_resume_runs_every_unfinished_step_once(crash: Crash) -> None:
    assert not of_type(crash.after, PlanCreated)  # the plan comes with `resumed`
    assert [s["id"] for s in crash.resumed.steps] == PLAN_STEPS
    todo = [s for s in PLAN_STEPS if s not in crash.resumed.completed_steps]
    assert crash.in_flight_when_killed <= set(todo)  # interrupted work is redone from scratch
    completed = [e.step_id for e in of_type(crash.after, StepCompleted)]
    assert sorted(s for s in completed if s in todo) == sorted(todo)
    # a step finished before the kill is reported again only if the kill lost its event before
    # it was stored (then the stored run has it once); it never runs again (test above)
    again = [s for s in completed if s not in todo]
    assert set(again) <= set(crash.resumed.completed_steps) and len(again) == len(set(again))
    every = [*crash.before, *crash.after]
    position = {id(e): i for i, e in enumerate(every)}
    for step_id in todo:
        start = next(e for e in of_type(every, StepStarted) if e.step_id == step_id)
        end = next(e for e in of_type(crash.after, StepCompleted) if e.step_id == step_id)
        assert position[id(start)] < position[id(end)], step_id


def test_nothing_is_announced_twice_across_the_crash(crash: Crash) -> None:
    every = [*crash.before, *crash.after]
    started = [e.step_id for e in of_type(every, StepStarted)]
    assert sorted(started) == sorted(PLAN_STEPS)  # in-flight steps were not announced again
    calls = [e.call_id for e in every if e.type == "tool_called"]
    assert calls and len(calls) == len(set(calls))
    assert len(of_type(every, PlanCreated)) == 1


def test_the_final_report_holds_every_step_and_keeps_earlier_results(crash: Crash) -> None:
    report = crash.final.output
    for step_id in PLAN_STEPS:
        assert f"### Step: {step_id}" in report
    for event in of_type(crash.before, StepCompleted):
        assert event.output in report, event.step_id  # from the ledger, not recomputed
    assert "Offline model" in report


def test_usage_after_resume_counts_the_work_done_before_the_crash(crash: Crash) -> None:
    planner = [u.usage for u in of_type(crash.before, UsageRecorded) if u.agent == "planner"]
    steps = {e.step_id: e.usage for e in of_type([*crash.before, *crash.after], StepCompleted)}
    assert set(steps) == set(PLAN_STEPS)
    assert planner == []  # the offline planner plans by the rules: no model call to pay for
    expected_in = sum(u.input_tokens for u in steps.values())
    expected_out = sum(u.output_tokens for u in steps.values())
    assert (crash.final.usage.input_tokens, crash.final.usage.output_tokens) == (
        expected_in,
        expected_out,
    )


def test_a_resumed_run_reports_what_the_same_run_costs_uninterrupted(
    crash: Crash, tmp_path: Path
) -> None:
    """Every reply paid for before the kill is counted once (from the journal), and nothing
    twice: the offline model is deterministic, so the uninterrupted run spends the same."""
    from teamgraph.config import Settings
    from teamgraph.runtime.team_api import Team

    settings = Settings(database_url=f"sqlite:///{tmp_path}/again.db")
    team = Team.from_yaml(Path(crash.db.removeprefix("sqlite:///")).parent / "team.yaml")
    again = Team(team.spec.model_copy(update={"model_kwargs": {}}), settings=settings)
    result = asyncio.run(again.run(REQUEST))
    assert result.status == "completed"
    assert crash.final.usage.total_tokens == result.usage.total_tokens > 0
    assert crash.final.usage.cost_usd == result.usage.cost_usd


def test_runs_shows_the_resumed_run_completed(crash: Crash) -> None:
    result = CliRunner().invoke(app, ["runs", "--db", crash.db], env={"COLUMNS": "400"})

    assert result.exit_code == 0, result.output
    line = next((ln for ln in result.stdout.splitlines() if crash.run_id[:12] in ln), None)
    assert line is not None, result.stdout
    assert "completed" in line
    assert "completed_with_errors" not in line


def test_a_resumed_and_finished_run_cannot_be_resumed_again(crash: Crash) -> None:
    result = CliRunner().invoke(
        app, ["resume", crash.run_id, "--db", crash.db], env={"COLUMNS": "400"}
    )

    assert result.exit_code == 2, result.output
    assert "already ended" in " ".join(result.output.split())


def test_resumed_events_continue_the_runs_seq(crash: Crash) -> None:
    assert min(e.seq for e in crash.after) > max(e.seq for e in crash.before)
