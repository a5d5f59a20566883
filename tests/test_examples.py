"""Every example team runs offline from the CLI, whatever its pattern."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from teamgraph.cli import app

REPO = Path(__file__).resolve().parents[1]
TEAMS = sorted((REPO / "examples" / "teams").glob("*.yaml"))
REQUEST = "Compare PostgreSQL and MongoDB on security and cost"


def test_every_pattern_has_an_example() -> None:
    import yaml

    patterns = {yaml.safe_load(t.read_text()).get("pattern", "workflow") for t in TEAMS}
    assert {"workflow", "supervisor", "swarm", "collaborative", "single"} <= patterns
    assert (REPO / "examples" / "teams" / "hierarchical.yaml") in TEAMS


@pytest.mark.parametrize("team", TEAMS, ids=[t.stem for t in TEAMS])
def test_example_team_runs_offline_from_the_cli(team: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--team",
            str(team),
            "--db",
            f"sqlite:///{tmp_path}/ex.db",
            "--events",
            "jsonl",
            "--no-input",
            REQUEST,
        ],
    )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    last = events[-1]
    assert last["type"] == "run_completed" and last["status"] == "completed"
    assert "Offline model" in last["output"]  # every offline answer says what wrote it
    assert last["usage"]["input_tokens"] > 0


def _try_line(team: Path) -> tuple[str, str]:
    """The ``# Try: teamgraph run -t NAME "REQUEST"`` line of an example: its name and request."""
    for line in team.read_text(encoding="utf-8").splitlines():
        if line.startswith("# Try: teamgraph run"):
            words = shlex.split(line.removeprefix("# Try: "))
            return words[words.index("-t") + 1], words[-1]
    raise AssertionError(f"{team} has no '# Try: teamgraph run -t …' line")


def _quoted(output: str) -> list[str]:
    """The passages an offline answer quotes: the text after each ``**label**:`` (a workflow
    report's ``**Task**:`` lines say what each step was asked)."""
    found = re.findall(r"\*\*([^*\n]+)\*\*: (.+)", output)
    return [text.strip() for label, text in found if label != "Task"]


@pytest.mark.parametrize("team", TEAMS, ids=[t.stem for t in TEAMS])
def test_example_answers_its_demo_request_from_its_tools(team: Path, tmp_path: Path) -> None:
    name, request = _try_line(team)
    result = CliRunner().invoke(
        app,
        ["run", "-t", name, "--db", f"sqlite:///{tmp_path}/ex.db", "--events", "jsonl", request],
    )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    found = " ".join(" ".join(e["output"].split()) for e in events if e["type"] == "tool_returned")
    answer = events[-1]["output"]
    assert "No documents, tool results or previous steps" not in answer
    quoted = _quoted(answer)
    assert quoted, answer
    # every quoted passage comes from what the run's tools found, not from the request
    for passage in quoted:
        assert " ".join(passage.split())[:60] in found, passage
    subject = {w for w in re.findall(r"[A-Za-z]{5,}", request)} - {"Compare", "How", "Find"}
    assert any(word.lower() in answer.lower() for word in subject), answer


EVERYDAY = (
    "How does MongoDB secure access?",
    "Write a short summary of Redis persistence options",
    "What are the security risks of running MongoDB without authentication?",
)


@pytest.mark.parametrize("team", TEAMS, ids=[t.stem for t in TEAMS])
def test_everyday_requests_are_answered_from_the_team_knowledge(team: Path, tmp_path: Path) -> None:
    """Whoever the request reaches (a writer without tools included), the answer quotes the
    team's documents — never an empty-handed "nothing was available"."""
    db = f"sqlite:///{tmp_path}/ex.db"
    for request in EVERYDAY:
        result = CliRunner().invoke(
            app, ["run", "-t", str(team), "--db", db, "--events", "jsonl", "--no-input", request]
        )
        assert result.exit_code == 0, result.output
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        answer = events[-1]["output"]
        assert "I can't answer this yet" not in answer, (request, answer)
        assert re.search(r"\b(?:mongodb|redis)\.md\b", answer), (request, answer)


GREETING_TEAMS = [t for t in TEAMS if "clarify: true" not in t.read_text(encoding="utf-8")]


@pytest.mark.parametrize("team", GREETING_TEAMS, ids=[t.stem for t in GREETING_TEAMS])
def test_a_greeting_is_answered_not_searched(team: Path, tmp_path: Path) -> None:
    """ "hello" gets a greeting that says what the offline model can do — not a search for
    "hello" ("No documents matched") nor a passage that happens to match it. (A team that asks
    clarifying questions asks one instead: a greeting says nothing of what is wanted.)"""
    db = f"sqlite:///{tmp_path}/ex.db"
    for request, opening, says in (
        ("Hi there!", "Hello!", "offline model"),
        ("谢谢", "不客气！", "离线模型"),
    ):
        result = CliRunner().invoke(
            app, ["run", "-t", str(team), "--db", db, "--events", "jsonl", "--no-input", request]
        )
        assert result.exit_code == 0, result.output
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        answer = events[-1]["output"]
        assert answer.startswith(opening) and says in answer, (request, answer)
        assert "No documents matched" not in answer and ".md" not in answer
        assert "no decomposition rule" not in result.stdout  # nothing to note to the user
