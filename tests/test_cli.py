"""The ``teamgraph`` command line: run (table and jsonl), resume, runs, templates, ingest."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner, Result

import teamgraph as teamgraph_package
from teamgraph.cli import _team, app
from teamgraph.config import Settings
from teamgraph.errors import UsageError
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
from teamgraph.storage.models import utcnow

from .held_tools import HELD_REQUEST, HELD_TEAM
from .helpers import PROCESS_CEILING_S

REPO = Path(__file__).resolve().parents[1]
RESEARCH_TEAM = REPO / "examples" / "teams" / "research.yaml"
KNOWLEDGE = REPO / "examples" / "knowledge"
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"
RESEARCH_STEPS = ["research_performance", "research_security", "research_cost"]
PLAN_STEPS = [*RESEARCH_STEPS, "summary"]
BUILTIN_TEMPLATES = ["code_review", "data_pipeline", "parallel_comparison", "research_report"]
CODE_REQUEST = "Review this function for bugs: def f(x): return x/0"
# A team that has every built-in worker, so every built-in template fits it.
ALL_WORKERS_TEAM = (
    "name: all\nmodel: offline\nmembers: [researcher, coder, analyst, writer, critic]\n"
)

cli = CliRunner()
E = TypeVar("E", bound=BaseEvent)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/t.db"


def invoke(*args: str | Path) -> Result:
    # A wide terminal, so that rich never wraps or elides ids, paths and messages.
    return cli.invoke(app, [str(a) for a in args], env={"COLUMNS": "400"})


def flat(text: str) -> str:
    return " ".join(text.split())


def explain(result: Result) -> str:
    return f"exit {result.exit_code}, exception {result.exception!r}\n{result.output}"


def jsonl_events(result: Result) -> list[BaseEvent]:
    lines = result.stdout.splitlines()
    assert lines, explain(result)
    return [event_from_json(line) for line in lines]


def of_type(events: list[BaseEvent], cls: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, cls)]


def run_jsonl(db: str, *args: str | Path, request: str = REQUEST) -> tuple[Result, list[BaseEvent]]:
    result = invoke("run", *args, "--events", "jsonl", "--db", db, request)
    return result, jsonl_events(result)


def write_team(tmp_path: Path, text: str, name: str = "team.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- run ------------------------------------------------------------------------------------------
def test_run_offline_demo_in_table_mode(db: str) -> None:
    result = invoke("run", "--team", RESEARCH_TEAM, "--db", db, REQUEST)

    assert result.exit_code == 0, explain(result)
    assert "# Workflow Results" in result.stdout
    for step_id in PLAN_STEPS:
        assert step_id in result.stdout
        assert f"### Step: {step_id}" in result.stdout
    assert "Offline model" in result.stdout
    assert "completed" in result.stdout


def test_run_jsonl_is_one_parseable_event_per_line_in_order(db: str) -> None:
    result, events = run_jsonl(db, "--team", RESEARCH_TEAM)

    assert result.exit_code == 0, explain(result)
    assert isinstance(events[0], RunStarted)
    assert events[0].input == REQUEST
    last = events[-1]
    assert isinstance(last, RunCompleted)
    assert last.status == "completed"
    assert len({e.run_id for e in events}) == 1
    seqs = [e.seq for e in events]
    assert all(a < b for a, b in itertools.pairwise(seqs)), seqs

    (plan,) = of_type(events, PlanCreated)
    assert plan.tier == "rules"  # the offline model plans by the rules, and says so
    assert [s["id"] for s in plan.steps] == PLAN_STEPS
    assert sorted(plan.steps[-1]["depends_on"]) == sorted(RESEARCH_STEPS)

    position = {e.seq: i for i, e in enumerate(events)}
    started = {e.step_id: position[e.seq] for e in of_type(events, StepStarted)}
    completed = {e.step_id: position[e.seq] for e in of_type(events, StepCompleted)}
    assert len(of_type(events, StepStarted)) == len(of_type(events, StepCompleted)) == 4
    assert set(started) == set(completed) == set(PLAN_STEPS)
    for step_id in PLAN_STEPS:
        assert started[step_id] < completed[step_id], step_id
    assert all(completed[s] < started["summary"] for s in RESEARCH_STEPS)

    assert "# Workflow Results" in last.output
    for step_id in PLAN_STEPS:
        assert f"### Step: {step_id}" in last.output
    spent = of_type(events, UsageRecorded)
    assert last.usage.input_tokens == sum(u.usage.input_tokens for u in spent) > 0
    assert last.usage.output_tokens == sum(u.usage.output_tokens for u in spent) > 0


def test_run_rejects_an_unknown_events_mode(db: str) -> None:
    result = invoke("run", "--team", RESEARCH_TEAM, "--events", "xml", "--db", db, REQUEST)

    assert result.exit_code == 2, explain(result)
    assert "'xml'" in result.output
    assert "# Workflow Results" not in result.output


def test_run_with_a_template_plans_from_it(tmp_path: Path, db: str) -> None:
    team = write_team(tmp_path, ALL_WORKERS_TEAM)

    result, events = run_jsonl(
        db, "--team", team, "--template", "code_review", request=CODE_REQUEST
    )

    assert result.exit_code == 0, explain(result)
    (plan,) = of_type(events, PlanCreated)
    assert plan.tier == "template"
    assert plan.plan_name == "code_review"
    assert [s["id"] for s in plan.steps] == ["analyze_code", "find_bugs", "style_review", "summary"]
    tasks = [s["task"] for s in plan.steps] + [e.task for e in of_type(events, StepStarted)]
    assert len(tasks) == 8
    for task in tasks:
        assert task.endswith(f"User's original request: {CODE_REQUEST}"), task
    final = events[-1]
    assert isinstance(final, RunCompleted)
    assert final.status == "completed"


@pytest.mark.parametrize(
    ("team", "template", "says"),
    [
        (RESEARCH_TEAM, "nope", "--template nope: no such template; templates: code_review"),
        (RESEARCH_TEAM, "code_review", "'code_review' needs coder, which the team does not have"),
        (REPO / "examples" / "teams" / "single.yaml", "research_report", "is not a workflow team"),
    ],
)
def test_a_template_that_cannot_apply_fails_before_the_run(
    db: str, team: Path, template: str, says: str
) -> None:
    result = invoke("run", "--team", team, "--template", template, "--db", db, CODE_REQUEST)
    assert result.exit_code == 2, explain(result)
    assert says in flat(result.output) and "Traceback" not in result.output
    assert "running" not in result.output  # no table: nothing ran
    assert "Review this" not in invoke("runs", "--db", db).output


def test_exit_code_3_when_some_steps_fail(tmp_path: Path, db: str) -> None:
    # The writer's model cannot be built (conftest refuses real clients), so `summary` fails.
    team = write_team(
        tmp_path,
        (
            f"name: partial\nmodel: offline\nknowledge: [{KNOWLEDGE}]\n"
            "members:\n  - researcher\n  - analyst\n"
            "  - name: writer\n    model: openai:gpt-4o-mini\n"
        ),
    )

    result = invoke("run", "--team", team, "--db", db, REQUEST)

    assert result.exit_code == 3, explain(result)
    assert "### Step: research_cost" in result.stdout
    assert "**Failed**" in result.stdout
    assert "completed_with_errors" in result.output


def test_exit_code_1_when_every_step_fails(tmp_path: Path, db: str) -> None:
    team = write_team(
        tmp_path,
        (
            "name: broken\nmodel: offline\nmembers:\n"
            "  - name: researcher\n    model: openai:gpt-4o-mini\n"
            "  - name: writer\n    model: openai:gpt-4o-mini\n"
        ),
    )

    result = invoke("run", "--team", team, "--db", db, REQUEST)

    assert result.exit_code == 1, explain(result)
    assert "failed" in result.output


@pytest.mark.parametrize(
    ("yaml_text", "field", "value"),
    [
        ("name: bad\nmembers: [researcher, wizard]\n", "members[1]", "'wizard'"),
        (
            "name: bad\nmembers:\n  - name: researcher\n    tools: [web_serch]\n",
            "members[0].tools[0]",
            "'web_serch'",
        ),
        (
            "name: bad\nmembers: [researcher]\nworkflow:\n  max_parallel: lots\n",
            "workflow.max_parallel",
            "'lots'",
        ),
    ],
    ids=["unknown-worker", "unknown-tool", "wrong-type"],
)
def test_a_bad_team_file_is_a_usage_error_naming_file_field_and_value(
    tmp_path: Path, db: str, yaml_text: str, field: str, value: str
) -> None:
    team = write_team(tmp_path, yaml_text)

    result = invoke("run", "--team", team, "--db", db, "anything")

    assert result.exit_code == 2, explain(result)
    message = flat(result.output)
    assert re.search(rf"{re.escape(str(team))}:\d+:\d+: {re.escape(field)}", message)
    assert value in message
    assert "Traceback" not in result.output


def test_a_missing_team_file_is_a_usage_error(tmp_path: Path, db: str) -> None:
    missing = tmp_path / "nope.yaml"

    result = invoke("run", "--team", missing, "--db", db, "anything")

    assert result.exit_code == 2, explain(result)
    assert str(missing) in flat(result.output)


# --- runs, resume ---------------------------------------------------------------------------------
def test_runs_lists_a_finished_run_with_its_status(db: str) -> None:
    _, events = run_jsonl(db, "--team", RESEARCH_TEAM)
    run_id = events[0].run_id

    result = invoke("runs", "--db", db)

    assert result.exit_code == 0, explain(result)
    line = next((ln for ln in result.stdout.splitlines() if run_id[:12] in ln), None)
    assert line is not None, result.stdout
    tokens = events[-1].usage.total_tokens  # type: ignore[attr-defined]
    assert "completed" in line and "research" in line and f" {tokens} " in line


def test_runs_on_an_empty_database_lists_nothing(db: str) -> None:
    result = invoke("runs", "--db", db)

    assert result.exit_code == 0, explain(result)
    assert not re.search(r"[0-9a-f]{32}", result.stdout)


def test_prune_removes_old_runs_and_says_how_many(db: str) -> None:
    _, events = run_jsonl(db, "--team", RESEARCH_TEAM)
    run_id = events[0].run_id

    kept = invoke("prune", "--older-than", "30d", "--db", db)
    assert kept.exit_code == 0, explain(kept)
    assert "removed 0 run(s)" in kept.stdout
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:  # the run ended 40 days ago
        conn.execute(
            "UPDATE runs SET updated_at = ?",
            (f"{(utcnow() - timedelta(days=40)).replace(tzinfo=None)}",),
        )
    dry = invoke("prune", "--older-than", "30d", "--status", "completed", "--dry-run", "--db", db)
    assert dry.exit_code == 0, explain(dry)
    assert f"would remove 1 run(s): {run_id[:12]}" in dry.stdout
    assert run_id[:12] in invoke("runs", "--db", db).stdout
    removed = invoke("prune", "--older-than", "30d", "--db", db)
    assert removed.exit_code == 0, explain(removed)
    assert "removed 1 run(s)" in removed.stdout
    assert run_id[:12] not in invoke("runs", "--db", db).stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--older-than", "soon"], "age 'soon'"),
        (["--older-than", "1d", "--status", "running"], "never pruned"),
        (["--older-than", "1d", "--status", "done"], "--status 'done'"),
    ],
)
def test_prune_refuses_bad_input_naming_it(db: str, args: list[str], says: str) -> None:
    result = invoke("prune", *args, "--db", db)

    assert result.exit_code == 2, explain(result)
    assert says in flat(result.output)


def test_resume_of_an_unknown_run_is_a_usage_error(db: str) -> None:
    result = invoke("resume", "no-such-run", "--db", db)

    assert result.exit_code == 2, explain(result)
    assert "no run with id 'no-such-run'" in flat(result.output)
    assert "Traceback" not in result.output


def test_resume_of_a_finished_run_is_a_usage_error(db: str) -> None:
    _, events = run_jsonl(db, "--team", RESEARCH_TEAM)
    run_id = events[0].run_id

    result = invoke("resume", run_id, "--events", "jsonl", "--db", db)

    assert result.exit_code == 2, explain(result)
    assert run_id in result.output
    assert "already ended" in flat(result.output)
    assert f"teamgraph show {run_id[:12]}" in flat(result.output)  # where its answer is
    assert not of_type([event_from_json(x) for x in result.stdout.splitlines()], Resumed)

    shown = invoke("show", run_id[:12], "--db", db)
    assert shown.exit_code == 0, explain(shown)
    assert f"run {run_id}" in shown.output and "status: completed" in shown.output
    assert "step summary [done] writer" in shown.output
    assert events[-1].output.splitlines()[0] in shown.output  # the answer
    assert "usage: " in shown.output


# --- templates ------------------------------------------------------------------------------------
def test_templates_lists_the_builtin_templates() -> None:
    result = invoke("templates")

    assert result.exit_code == 0, explain(result)
    for name in BUILTIN_TEMPLATES:
        assert name in result.stdout
    assert "analyze_code → find_bugs → style_review → summary" in result.stdout


def test_templates_also_lists_the_team_templates_dirs(tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "triage.yaml").write_text(
        "description: Triage an incident\nsteps:\n"
        "  - {id: gather, worker: researcher, task: Gather the facts}\n"
        "  - {id: decide, worker: analyst, task: Decide, depends_on: [gather]}\n",
        encoding="utf-8",
    )
    team = write_team(
        tmp_path, "name: t\nmembers: [researcher, analyst]\nworkflow:\n  templates_dirs: [tpl]\n"
    )

    result = invoke("templates", "--team", team)

    assert result.exit_code == 0, explain(result)
    assert "triage" in result.stdout
    assert "gather → decide" in result.stdout
    for name in BUILTIN_TEMPLATES:
        assert name in result.stdout
    # the team has no coder or writer: those templates are listed as what it cannot run
    assert "not code_review: needs coder, critic, writer" in flat(result.stdout)


# --- ingest ---------------------------------------------------------------------------------------
INGEST = re.compile(
    r"indexed (\d+) file\(s\), (\d+) unchanged, (\d+) removed; (\d+) chunk\(s\) "
    r"written; (\d+) chunk\(s\) in the index"
)


def test_knowledge_lists_and_removes_what_ingest_indexed(db: str) -> None:
    assert invoke("ingest", KNOWLEDGE, "--db", db).exit_code == 0
    listed = invoke("knowledge", "list", "--db", db)
    assert listed.exit_code == 0, explain(listed)
    files = sorted(p.name for p in KNOWLEDGE.glob("*.md"))
    assert f"collection:default: {len(files)} document(s); no team searches it yet" in flat(
        listed.stdout
    )
    assert all(name in listed.stdout for name in files)

    missing = invoke("knowledge", "remove", "9999", "--db", db)
    assert missing.exit_code == 2
    assert "no document '9999' in collection:default" in flat(missing.output)
    removed = invoke("knowledge", "remove", KNOWLEDGE, "--db", db)
    assert removed.exit_code == 0, explain(removed)
    assert f"removed {len(files)} document(s) from collection:default; 0 chunk(s) left" in flat(
        removed.stdout
    )
    assert "collection:default: 0 document(s)" in flat(
        invoke("knowledge", "list", "--db", db).stdout
    )


def test_the_shared_collection_is_named_explicitly_and_every_team_reads_it(db: str) -> None:
    result = invoke("ingest", KNOWLEDGE, "--shared", "--db", db)

    assert result.exit_code == 0, explain(result)
    assert "shared: every team's runs search it" in flat(result.stdout)
    listed = invoke("knowledge", "list", "--shared", "--db", db)
    assert "shared: " in flat(listed.stdout) and "every team's runs search it" in flat(
        listed.stdout
    )
    both = invoke("ingest", KNOWLEDGE, "--shared", "--collection", "x", "--db", db)
    assert both.exit_code == 2 and "name one collection" in flat(both.output)
    bad = invoke("ingest", KNOWLEDGE, "--collection", "../etc", "--db", db)
    assert bad.exit_code == 2 and "--collection '../etc'" in flat(bad.output)


def test_a_named_collection_is_searched_only_by_the_teams_that_list_it(
    tmp_path: Path, db: str
) -> None:
    teams, docs = tmp_path / "teams", tmp_path / "docs"
    teams.mkdir()
    docs.mkdir()
    members = "model: offline\npattern: single\nmembers: [researcher]\n"
    (teams / "reader.yaml").write_text(f"name: reader\ncollections: [handbook]\n{members}")
    (teams / "other.yaml").write_text(f"name: other\n{members}")
    (docs / "zephyr.md").write_text(
        "# Zephyr keys\n\nThe Zephyr gateway rotates its signing keys every 17 days.\n"
    )
    env = {"COLUMNS": "400", "TEAMGRAPH_TEAMS_DIRS": json.dumps([str(teams)])}

    def run(*args: str | Path) -> Result:
        return cli.invoke(app, [str(a) for a in args], env=env)

    ingested = run("ingest", docs, "--collection", "handbook", "--db", db)
    assert ingested.exit_code == 0, explain(ingested)
    assert "collection:handbook: searched by team(s) reader" in flat(ingested.stdout)
    question = "How often does the Zephyr gateway rotate its signing keys?"
    read = run("run", "-t", "reader", "--events", "jsonl", "--db", db, question)
    unread = run("run", "-t", "other", "--events", "jsonl", "--db", db, question)

    assert read.exit_code == 0, explain(read)
    assert "17 days" in read.stdout
    assert "17 days" not in unread.stdout


def test_ingest_indexes_files_then_skips_unchanged_ones(db: str) -> None:
    files = len(list(KNOWLEDGE.glob("*.md")))
    assert files >= 2

    first = invoke("ingest", KNOWLEDGE, "--db", db)
    second = invoke("ingest", KNOWLEDGE, "--db", db)

    assert first.exit_code == 0, explain(first)
    assert second.exit_code == 0, explain(second)
    one, two = INGEST.search(flat(first.stdout)), INGEST.search(flat(second.stdout))
    assert one is not None, first.stdout
    assert "collection:default: no team searches it yet" in flat(first.stdout)  # says who reads
    assert two is not None, second.stdout
    indexed, unchanged, removed, written, total = map(int, one.groups())
    assert (indexed, unchanged, removed) == (files, 0, 0)
    assert written == total > files
    assert tuple(map(int, two.groups())) == (0, files, 0, 0, total)


def test_ingest_reindexes_only_a_changed_file(tmp_path: Path, db: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("redis.md", "mongodb.md"):
        (docs / name).write_text((KNOWLEDGE / name).read_text(encoding="utf-8"), encoding="utf-8")
    assert invoke("ingest", docs, "--db", db).exit_code == 0
    (docs / "redis.md").write_text("# Redis\n\nRedis keeps data in memory.\n", encoding="utf-8")

    result = invoke("ingest", docs, "--db", db)

    assert result.exit_code == 0, explain(result)
    found = INGEST.search(flat(result.stdout))
    assert found is not None, result.stdout
    assert tuple(map(int, found.groups()[:3])) == (1, 1, 0)


def test_ingest_of_a_missing_path_is_a_usage_error(tmp_path: Path, db: str) -> None:
    missing = tmp_path / "no-such-folder"

    result = invoke("ingest", missing, "--db", db)

    assert result.exit_code == 2, explain(result)
    assert str(missing) in flat(result.output)
    assert "Traceback" not in result.output


# --- user text is printed verbatim, never as rich markup ------------------------------------------
def test_error_messages_print_paths_with_brackets_verbatim(tmp_path: Path, db: str) -> None:
    missing = tmp_path / "notes[draft]" / "todo.md"

    result = invoke("ingest", missing, "--db", db)

    assert result.exit_code == 2, explain(result)
    assert str(missing) in flat(result.output)


def test_table_mode_prints_a_report_with_brackets_verbatim(tmp_path: Path, db: str) -> None:
    team = write_team(tmp_path, ALL_WORKERS_TEAM)
    request = "Review this function for bugs: def f(xs, i): return xs[i] / 0  # [/b]"

    result = invoke("run", "--team", team, "--template", "code_review", "--db", db, request)

    assert result.exit_code == 0, explain(result)
    assert f"User's original request: {request}" in result.stdout


def test_runs_survives_a_request_with_brackets(tmp_path: Path, db: str) -> None:
    team = write_team(tmp_path, ALL_WORKERS_TEAM)
    result, events = run_jsonl(db, "--team", team, request="Fix the [/b] tag")
    assert result.exit_code == 0, explain(result)

    listed = invoke("runs", "--db", db)

    assert listed.exit_code == 0, explain(listed)
    assert events[0].run_id[:12] in listed.stdout
    assert "Fix the [/b] tag" in listed.stdout


# --- a newcomer's rough edges ---------------------------------------------------------------------
def teamgraph(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed command in a folder of its own (not the repository's root)."""
    return subprocess.run(
        [sys.executable, "-m", "teamgraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
    )


def test_the_example_teams_ship_with_the_package_and_run_by_name(tmp_path: Path) -> None:
    teams = Path(Settings().teams_dirs[0])
    assert teams.is_dir() and (teams / "research.yaml").is_file()
    assert teams.is_relative_to(Path(teamgraph_package.__file__).parent)
    done = teamgraph(tmp_path, "run", "--events", "jsonl", "-t", "notebook", "--no-input", REQUEST)
    assert done.returncode == 0, done.stderr
    events = [event_from_json(line) for line in done.stdout.splitlines()]
    assert isinstance(events[0], RunStarted) and events[0].team == "notebook"
    assert "postgresql.md" in events[-1].output  # its knowledge came along


def test_serve_on_a_port_in_use_is_one_line_and_a_usage_error(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = teamgraph(
            tmp_path, "serve", "--port", str(port), "--db", f"sqlite:///{tmp_path}/s.db"
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use — choose another "
        "with --port (or --host)"
    )


def test_a_team_is_named_by_its_yaml_name_or_its_file_name(tmp_path: Path) -> None:
    """One name per team: `-t assistant` (its `name:`, as runs and the API show it) and, for
    compatibility, `-t single` (its file's name) are the same team; a near miss is suggested."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/t.db")
    assert _team("assistant", settings).spec.name == "assistant"
    assert _team("single", settings).spec.name == "assistant"
    assert _team("helpdesk", settings).spec.name == _team("swarm", settings).spec.name
    with pytest.raises(UsageError, match=r"did you mean 'helpdesk'.*teams: assistant"):
        _team("helpdsk", settings)


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["run", "-t", "{tmp}", "hi"], 2, "a folder; name a team's YAML file"),
        (["run", "-t", "nosuchteam", "hi"], 2, "no such file, and no team 'nosuchteam'"),
        (["runs", "--db", "mysql://x"], 2, "database URL 'mysql://x' is not supported"),
        (["run", "--db", "sqlite:///{tmp}/x.db", "  "], 2, "the request is empty"),
        (["runs", "--db", "sqlite:///{tmp}/nope/a/b.db"], 2, "nope/a does not exist"),
        (["run", "--db", "sqlite:///{tmp}/nope/a/b.db", "Compare A and B"], 2, "does not exist"),
        (
            ["runs", "--db", "postgresql://bob:s3cret@127.0.0.1:9/x"],
            1,
            "cannot use the database at postgresql://bob:***@127.0.0.1:9/x",
        ),
        (
            ["run", "--db", "postgresql://bob:s3cret@127.0.0.1:9/x", "Compare A and B"],
            1,
            "is it running and reachable?",
        ),
    ],
)
def test_a_failure_is_one_line_and_an_exit_code(
    tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    done = teamgraph(tmp_path, *(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("error: ") and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "s3cret" not in done.stderr
    assert done.stdout == ""  # no empty table before the error
    debug = teamgraph(tmp_path, "--debug", *(a.format(tmp=tmp_path) for a in args))
    assert debug.returncode == code
    assert "Traceback" in debug.stderr and debug.stderr.rstrip().endswith(done.stderr.strip())


def test_a_database_in_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    done = teamgraph(tmp_path, "runs", "--db", f"sqlite:///{tmp_path}/nope/a/b.db")
    assert done.returncode == 2
    assert f"the database's directory {tmp_path}/nope/a does not exist" in done.stderr
    assert not (tmp_path / "nope").exists()
    made = teamgraph(tmp_path, "runs", "--db", f"sqlite:///{tmp_path}/new.db")  # a new file: fine
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "new.db").is_file()


def test_a_read_only_database_file_is_one_line_about_the_file(tmp_path: Path) -> None:
    """SQLite's own error for a file it may not write, explained as a file's problem (not
    "is it running and reachable?"); as root, where a mode cannot refuse, the error is made by
    opening the file read-only."""
    from teamgraph.cli_errors import explain

    path = tmp_path / "ro.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(sqlite3.OperationalError) as raised:
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
    failure = explain(raised.value, f"sqlite:///{path}")
    assert failure.line.startswith(f"cannot use the database file {path}: attempt to write")
    assert "read and write it" in failure.line and "reachable" not in failure.line
    if os.geteuid() == 0:
        return
    path.chmod(0o444)
    for args in (["runs"], ["run", "Compare A and B"]):
        done = teamgraph(tmp_path, *args, "--db", f"sqlite:///{path}")
        assert done.returncode == 1
        assert done.stderr.startswith("error: cannot use the database file"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_resume_takes_the_short_id_the_run_shows(db: str) -> None:
    asked = invoke("run", "-t", "notebook", "--events", "jsonl", "--no-input", "--db", db, "help")
    assert asked.exit_code == 4, explain(asked)
    run_id = jsonl_events(asked)[0].run_id
    answered = invoke(
        "resume", run_id[:12], "--answer", "PostgreSQL JSON", "--events", "jsonl", "--db", db
    )
    assert answered.exit_code == 0, explain(answered)
    assert jsonl_events(answered)[-1].run_id == run_id


def test_runs_fits_80_columns_with_ids_resume_accepts(db: str) -> None:
    long = "Compare PostgreSQL and MongoDB on performance, security, cost and operations " * 2
    _, events = run_jsonl(db, "--team", RESEARCH_TEAM, request=long)
    listed = cli.invoke(app, ["runs", "--db", db], env={"COLUMNS": "80"})
    lines = listed.output.splitlines()
    assert all(len(line) <= 80 for line in lines), listed.output
    [row] = [line for line in lines if events[0].run_id[:12] in line]
    assert "completed" in row and "Compare" in row  # one line per run, input cut not wrapped


def test_piped_output_keeps_the_table_and_the_report_apart(db: str) -> None:
    result = invoke("run", "--team", RESEARCH_TEAM, "--db", db, REQUEST)
    caption = [line for line in result.stdout.splitlines() if "tokens · $" in line]
    assert caption and all("#" not in line for line in caption), result.stdout
    assert "\n# Workflow Results" in result.stdout


def test_the_approval_prompt_takes_words_and_ctrl_d_says_how_to_resume(db: str) -> None:
    save = "Save a note: Redis keeps data in memory"
    approved = cli.invoke(
        app, ["run", "-t", "notebook", "--db", db, save], input="approve\n", env={"COLUMNS": "200"}
    )
    assert approved.exit_code == 0, explain(approved)
    assert "completed" in approved.output
    closed = cli.invoke(app, ["run", "-t", "notebook", "--db", db, save], input="")
    assert closed.exit_code == 4, explain(closed)
    assert "input ended before an answer; continue it with: teamgraph resume " in flat(
        closed.output
    )


def test_ctrl_c_cancels_and_says_the_resume_command(tmp_path: Path) -> None:
    # the run's one step holds until the test releases it: Ctrl-C lands mid-step for certain
    team = write_team(tmp_path, HELD_TEAM)
    released = tmp_path / "released"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TG_RELEASE_FILE": str(released)}
    db = f"sqlite:///{tmp_path}/c.db"
    args = [sys.executable, "-m", "teamgraph", "run", "-t", str(team), "--events", "jsonl"]
    with subprocess.Popen(
        [*args, "--db", db, HELD_REQUEST],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        held = next((line for line in process.stdout if '"tool_called"' in line), "")
        assert held, "the run ended before its step was held"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=PROCESS_CEILING_S)
    assert process.returncode == 130, err
    short = event_from_json(held).run_id[:12]
    assert f"run {short} cancelled (Ctrl-C); continue it with: teamgraph resume {short}" in err
    released.touch()
    resumed = teamgraph(tmp_path, "resume", short, "--events", "jsonl", "--db", db, env=env)
    assert resumed.returncode == 0, resumed.stderr


def test_ctrl_c_at_the_approval_prompt_stops_the_first_time(tmp_path: Path) -> None:
    """The prompt blocks the event loop, whose own Ctrl-C handler acted only after it: the
    first Ctrl-C was lost. Now it stops at once; the run waits for its answer."""
    args = [sys.executable, "-m", "teamgraph", "run", "-t", "notebook", "--events", "jsonl"]
    db = f"sqlite:///{tmp_path}/p.db"
    with subprocess.Popen(
        [*args, "--db", db, "Save a note: Redis keeps data in memory"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stderr is not None
        said = b""
        while b"approve, reject or edit" not in said:  # the prompt is up (no newline after it)
            chunk = os.read(process.stderr.fileno(), 4096)
            assert chunk, said
            said += chunk
        process.send_signal(signal.SIGINT)  # once
        _, err = process.communicate(timeout=PROCESS_CEILING_S)
    assert process.returncode == 130, err
    assert b"waits: stopped at the prompt (Ctrl-C); continue it with: teamgraph resume" in err
    assert b"Traceback" not in err


def test_a_run_without_a_plan_shows_its_agents(db: str) -> None:
    result = invoke("run", "-t", "swarm", "--db", db, "How does PostgreSQL vacuum work?")

    assert result.exit_code == 0, explain(result)
    table = result.stdout.split("completed ·", 1)[0]
    assert "plan:" not in table  # a swarm has no plan to name
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    assert "→ database_expert" in rows["triage"] and "done" in rows["triage"]
    assert "answered" in rows["database_expert"]


@pytest.mark.parametrize("command", [["worker"], ["serve", "--workers", "0"]])
def test_the_scale_out_roles_refuse_sqlite_in_one_line(command: list[str]) -> None:
    result = invoke(*command)
    assert result.exit_code == 2
    assert "needs PostgreSQL: set DATABASE_URL=postgresql://" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
