"""The CLI's documentation matches the CLI: docs/api.md's table against the commands' own options,
and every command the README shows runs (placeholders filled in, as a reader would)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from teamgraph.cli import app

REPO = Path(__file__).resolve().parents[1]
API = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
CLI_SECTION = API.split("\n## CLI\n", 1)[1].split("\n## ", 1)[0]


def _options(command: Any) -> list[str]:
    return [
        opt
        for param in command.params
        if not getattr(param, "hidden", False)
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]
        if opt.startswith("--") and opt != "--help"
    ]


def _commands() -> dict[str, list[str]]:
    """Every command (``db upgrade`` for a group's) and its long options."""
    root = typer.main.get_command(app)
    found: dict[str, list[str]] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            found[" ".join(path)] = _options(command)

    walk(root, [])
    return found


def _rows() -> dict[str, str]:
    """The CLI table's first cells, by the command they document."""
    rows = {}
    for line in CLI_SECTION.splitlines():
        cell = re.match(r"\| `teamgraph ([^`]*)`", line)
        if cell:
            words = [w for w in cell.group(1).split() if re.fullmatch(r"[a-z]+", w)]
            command = " ".join(words[:2]) if words[0] in ("db", "knowledge") else words[0]
            rows[command] = cell.group(1)
    return rows


def _named(option: str, text: str) -> bool:
    return re.search(rf"{re.escape(option)}(?![a-z-])", text) is not None


@pytest.mark.parametrize("command", sorted(_commands()))
def test_the_cli_table_documents_every_command_and_option(command: str) -> None:
    rows = _rows()
    assert command in rows, f"docs/api.md's CLI table has no row for `teamgraph {command}`"
    options = _commands()[command]
    missing = [o for o in options if not _named(o, rows[command])]
    assert not missing, f"`teamgraph {command}` options missing from docs/api.md: {missing}"
    unknown = sorted(set(re.findall(r"--[a-z][a-z-]*", rows[command])) - set(options))
    assert not unknown, f"docs/api.md names options `teamgraph {command}` does not have: {unknown}"


def test_the_clis_own_options_are_documented() -> None:
    root = typer.main.get_command(app)
    assert all(_named(o, CLI_SECTION) for o in _options(root)), _options(root)


# --- the README's commands --------------------------------------------------------------------
README = (REPO / "README.md").read_text(encoding="utf-8")
DEMO = "Compare PostgreSQL and MongoDB on cost"
# what a reader puts for the README's placeholders
FILLED = {"-t …": "-t research", '"…"': f'"{DEMO}"', "postgresql://…": "postgresql://127.0.0.1:1/x"}
# the exit code a command exits with as filled in, when it is not 0
EXITS = {"--debug runs --db postgresql://": 1}  # shows a failure, and its traceback
# alternatives on one line ("--approve | --reject … | --edit … | --answer …"): each is a resume
# decision tested in tests/test_cli.py; the line's "--answer" alternative runs here
ALTERNATIVES = " | "


def _readme_commands() -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].strip()
            if re.match(r"(\.venv/bin/)?teamgraph\s", line):
                lines.append(re.sub(r"\s+", " ", line))
    return lines


def _filled(line: str) -> str:
    for placeholder, value in FILLED.items():
        line = line.replace(placeholder, value)
    return line


def _run(args: list[str], db: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, args, input=stdin, env={"TEAMGRAPH_DATABASE_URL": db})


def _paused_run(db: str) -> str:
    asked = _run(["run", "-t", "notebook", "--no-input", "help"], db)
    assert asked.exit_code == 4, asked.output
    found = re.search(r"teamgraph resume ([0-9a-f]{32})", asked.output)
    assert found, asked.output
    return found.group(1)


@pytest.mark.parametrize("line", _readme_commands())
def test_every_readme_command_runs(
    line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    db = f"sqlite:///{tmp_path}/readme.db"
    command = _filled(line.removeprefix(".venv/bin/"))
    stdin = None
    if "RUN_ID" in command:  # a paused run to continue, as the reader has one
        if ALTERNATIVES in command:
            command = command.split(" RUN_ID ", 1)[0] + " RUN_ID --answer …"
        command = command.replace("RUN_ID", _paused_run(db)).replace("…", '"Redis persistence"')
        stdin = "Redis persistence\n"  # without --answer, resume asks the run's question
    assert "…" not in command, f"fill in the placeholder of: {line}"
    args = shlex.split(command)[1:]
    result = _run(args, db, stdin)
    expected = next((code for part, code in EXITS.items() if part in command), 0)
    assert result.exit_code == expected, f"{command}\n{result.output}"
    if expected:  # --debug lets the failure's traceback through
        assert result.exception is not None and not isinstance(result.exception, SystemExit)


def test_the_readme_shows_commands() -> None:
    assert len(_readme_commands()) >= 10


DEPLOY = REPO / "deploy"


def _deploy_commands() -> list[tuple[str, str]]:
    """Every ``teamgraph serve|worker …`` command in deploy/ (Procfile, systemd units, compose)
    and docs/deploy.md."""
    found = []
    for path in [*sorted(DEPLOY.iterdir()), REPO / "docs" / "deploy.md"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("#"):
                continue
            for match in re.finditer(r"teamgraph ((?:serve|worker)\b[^\"`#\n]*)", line):
                found.append((path.name, match.group(1).strip()))
    return found


def test_the_deployment_files_start_real_commands_with_real_options() -> None:
    commands = _commands()
    seen = _deploy_commands()
    assert {name for name, _ in seen} >= {
        "Procfile",
        "compose.yaml",
        "teamgraph-api.service",
        "teamgraph-worker@.service",
        "deploy.md",
    }
    for name, line in seen:
        command, *rest = shlex.split(line.replace("${PORT:-8000}", "8000"))
        used = [word.split("=")[0] for word in rest if word.startswith("--")]
        unknown = [o for o in used if o not in commands[command]]
        assert not unknown, f"{name}: `teamgraph {command}` has no option {unknown}"
        if command == "serve" and name != "deploy.md":
            assert "--workers" in used  # API only: the workers execute the runs
