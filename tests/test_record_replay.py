"""Record a run, replay it with no model and no tools, and see where two runs differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from teamgraph.result import diff_runs
from teamgraph.runtime.team_api import Team
from teamgraph.testing import ScriptedChatModel, ToolCall

from .helpers import EXAMPLES, by_type, run_collect

REQUEST = "Compare PostgreSQL and MongoDB on performance and cost"
executions: list[str] = []


@tool
def lookup(query: str) -> str:
    """Look a fact up (counts its executions: a replay must not run it)."""
    executions.append(query)
    return f"facts about {query}"


@pytest.mark.parametrize("example", ["research", "supervisor", "swarm", "collaborative"])
async def test_a_recorded_run_replays_without_models_or_tools(
    settings: Any, tmp_path: Path, example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "run.jsonl"
    team = Team.from_yaml(EXAMPLES / f"{example}.yaml", settings=settings)
    recorded, _ = await run_collect(team, REQUEST, run_id="rec", record=tape)
    assert recorded.status == "completed"
    entries = [json.loads(line) for line in tape.read_text().splitlines()[1:]]
    assert {e["kind"] for e in entries} >= {"model"}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a replayed run must not run a tool or call a model")

    monkeypatch.setattr("langchain_core.tools.BaseTool.ainvoke", refuse)
    monkeypatch.setattr("teamgraph.llm.offline.respond", refuse)
    replayed, events = await run_collect(team, REQUEST, run_id="rep", replay=tape)
    assert replayed.status == "completed"
    assert replayed.output == recorded.output
    assert replayed.usage == recorded.usage  # the recorded replies carry their usage
    assert [(s.id, s.output) for s in replayed.steps] == [(s.id, s.output) for s in recorded.steps]
    assert diff_runs(recorded, replayed) == ""
    assert by_type(events, "tool_returned") or example != "research"


async def test_a_changed_request_fails_with_a_diff(settings: Any, tmp_path: Path) -> None:
    tape = tmp_path / "run.jsonl"
    spec = {"name": "one", "pattern": "single", "members": ["researcher"]}
    team = Team.from_dict(spec, settings=settings)
    await team.run("What is MVCC in PostgreSQL?", record=tape)
    result = await team.run("What is MVCC in MySQL?", replay=tape)
    assert result.status == "failed"
    assert result.error.startswith("ReplayMismatch: the replayed run asked at one/researcher")
    assert "--- recorded" in result.error and "+++ asked now" in result.error
    assert "PostgreSQL" in result.error and "MySQL" in result.error


async def test_tool_results_come_from_the_recording(settings: Any, tmp_path: Path) -> None:
    tape = tmp_path / "run.jsonl"
    spec = {
        "name": "t",
        "pattern": "single",
        "members": [{"name": "finder", "description": "finds facts", "tools": ["lookup"]}],
    }
    script = [ToolCall("lookup", {"query": "MVCC"}), "MVCC keeps old row versions."]
    recording = Team.from_dict(
        spec, settings=settings, model=ScriptedChatModel(responses=list(script)), tools=[lookup]
    )
    executions.clear()
    first = await recording.run("explain MVCC", record=tape)
    assert executions == ["MVCC"]
    replaying = Team.from_dict(
        spec, settings=settings, model=ScriptedChatModel(responses=[]), tools=[lookup]
    )
    again = await replaying.run("explain MVCC", replay=tape)
    assert executions == ["MVCC"]  # not run again: its recorded result was used
    assert again.output == first.output == "MVCC keeps old row versions."


async def test_a_replay_asking_more_than_the_recording_says_so(
    settings: Any, tmp_path: Path
) -> None:
    tape = tmp_path / "short.jsonl"
    tape.write_text('{"teamgraph_cassette": 1}\n')
    spec = {"name": "one", "pattern": "single", "members": ["writer"]}
    result = await Team.from_dict(spec, settings=settings).run("write a haiku", replay=tape)
    assert result.status == "failed" and "no model call #1 at one/writer" in result.error


async def test_not_a_recording_is_a_clear_error(settings: Any, tmp_path: Path) -> None:
    from teamgraph.errors import UsageError

    team = Team.from_dict(
        {"name": "one", "pattern": "single", "members": ["writer"]}, settings=settings
    )
    (tmp_path / "x.jsonl").write_text("hello\n")
    with pytest.raises(UsageError, match="not a teamgraph recording"):
        await team.run("write", replay=tmp_path / "x.jsonl")
    with pytest.raises(UsageError, match="no such recording"):
        await team.run("write", replay=tmp_path / "missing.jsonl")


async def test_diff_shows_where_two_runs_differ(settings: Any) -> None:
    team = Team.from_yaml(EXAMPLES / "research.yaml", settings=settings)
    first = await team.run("Compare PostgreSQL and MongoDB on cost")
    second = await team.run("Compare PostgreSQL and MongoDB on performance and cost")
    report = diff_runs(first, second)
    assert report.startswith(f"--- run {first.run_id}\n+++ run {second.run_id}")
    assert "+step research_performance [done] researcher" in report
    assert diff_runs(first, first) == ""


def test_the_cli_records_replays_and_diffs_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from teamgraph.cli import app

    cli, db, tape = CliRunner(), f"sqlite:///{tmp_path}/cli.db", tmp_path / "tape.jsonl"
    common = ["--team", str(EXAMPLES / "research.yaml"), "--db", db, "--events", "jsonl"]

    def run_id(*args: str) -> str:
        result = cli.invoke(app, ["run", *common, "--no-input", *args])
        assert result.exit_code == 0, result.output
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        assert events[-1]["type"] == "run_completed", events[-1]
        return str(events[0]["run_id"])

    recorded = run_id("--record", str(tape), REQUEST)
    replayed = run_id("--replay", str(tape), REQUEST)
    same = cli.invoke(app, ["diff", recorded, replayed, "--db", db])
    assert (same.exit_code, same.stdout) == (0, "")
    other = run_id("Compare Redis and MongoDB on cost")
    differ = cli.invoke(app, ["diff", recorded, other, "--db", db])
    assert differ.exit_code == 1
    assert f"--- run {recorded}" in differ.stdout and "+step research_cost" in differ.stdout
    both = cli.invoke(app, ["run", *common, "--record", "a", "--replay", "b", REQUEST])
    assert both.exit_code == 2 and "choose one" in both.output
