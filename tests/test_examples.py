"""Every example team runs offline from the CLI, whatever its pattern."""

from __future__ import annotations

import json
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
