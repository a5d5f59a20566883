"""An approved side effect is never executed twice, even when the process is killed right after
the tool ran (real subprocesses, SIGKILL), and the CLI's pause/resume flow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .counting_tools import PAYMENTS_REQUEST, PAYMENTS_TEAM
from .helpers import PROCESS_CEILING_S

REPO = Path(__file__).resolve().parents[1]
TEAM, REQUEST = PAYMENTS_TEAM, PAYMENTS_REQUEST


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)
    env = {**os.environ, "TG_COUNTER_FILE": str(tmp_path / "charges.txt"), "PYTHONPATH": str(REPO)}
    return team, f"sqlite:///{tmp_path}/crash.db", env


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgraph.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
    )


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_no_double_execution_across_a_sigkill(setup: tuple[Path, str, dict[str, str]]) -> None:
    team, db, env = setup
    counter = Path(env["TG_COUNTER_FILE"])
    paused = _cli(
        "run", "--team", str(team), "--db", db, "--events", "jsonl", "--no-input", REQUEST, env=env
    )
    assert paused.returncode == 4, paused.stderr
    run_id = str(_events(paused.stdout)[0]["run_id"])
    assert "approval: clerk → charge_card" in paused.stderr and not counter.exists()

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "teamgraph.cli",
            "resume",
            run_id,
            "--approve",
            "--db",
            db,
            "--events",
            "jsonl",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + PROCESS_CEILING_S
    for line in proc.stdout:  # kill the moment the tool has returned
        if '"tool_returned"' in line and "charge_card" in line:
            proc.send_signal(signal.SIGKILL)
            break
        assert time.monotonic() < deadline
    proc.wait(timeout=PROCESS_CEILING_S)
    assert proc.returncode == -signal.SIGKILL
    charged = counter.read_text().splitlines()
    assert len(charged) == 1 and "42" in charged[0]  # the tool ran once before the kill

    finished = _cli(
        "resume", run_id, "--approve", "--db", db, "--events", "jsonl", "--no-input", env=env
    )
    assert finished.returncode == 0, finished.stderr
    assert counter.read_text().splitlines() == charged  # replayed from the journal, not re-run
    last = _events(finished.stdout)[-1]
    assert last["type"] == "run_completed" and last["status"] == "completed"
    assert f"charged the card of customer {charged[0]}" in str(last["output"])


def test_cli_prompts_for_a_decision(setup: tuple[Path, str, dict[str, str]]) -> None:
    from typer.testing import CliRunner

    from teamgraph.cli import app

    team, db, env = setup
    os.environ["TG_COUNTER_FILE"] = env["TG_COUNTER_FILE"]
    try:
        result = CliRunner().invoke(
            app, ["run", "--team", str(team), "--db", db, REQUEST], input="r\nnot today\n"
        )
    finally:
        del os.environ["TG_COUNTER_FILE"]
    assert result.exit_code == 0, result.output
    assert "wants to call charge_card" in result.output
    assert "rejected this call to charge_card: not today" in result.output
    assert not Path(env["TG_COUNTER_FILE"]).exists()
