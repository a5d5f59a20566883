"""``teamgraph`` — run teams, resume runs, list runs and templates, ingest documents."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from teamgraph.cli_pauses import ask, how_to_resume, resume_options
from teamgraph.config import Settings
from teamgraph.errors import TeamgraphError, UsageError
from teamgraph.events import Event, RunStatus
from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates
from teamgraph.runtime.backend import open_backend
from teamgraph.runtime.runner import Runner
from teamgraph.runtime.team import Team
from teamgraph.runtime.view import RunView
from teamgraph.specs.loader import team_from_dict

app = typer.Typer(
    help="Run durable, streamed, cost-tracked teams of AI agents.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)
EXIT: dict[RunStatus, int] = {  # every status a run can end an execution with
    "completed": 0,
    "completed_with_errors": 3,
    "failed": 1,
    "cancelled": 130,
    "interrupted": 4,
    "budget_exceeded": 5,
}
STATE_STYLE = {
    "waiting": "cyan",
    "pending": "dim",
    "running": "yellow",
    "done": "green",
    "failed": "red",
    "skipped": "magenta",
}

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: DATABASE_URL or sqlite:///./teamgraph.db)."),
]


def _settings(db: str | None) -> Settings:
    return Settings(database_url=db) if db else Settings()


def _fail(exc: BaseException) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(str(exc))}")
    return typer.Exit(2)


@app.command()
def run(
    request: Annotated[str, typer.Argument(help="What the team should do.")],
    team: Annotated[Path, typer.Option("--team", "-t", help="Team YAML file.")] = Path(
        "examples/teams/research.yaml"
    ),
    template: Annotated[str | None, typer.Option(help="Workflow template to plan with.")] = None,
    thread: Annotated[str | None, typer.Option(help="Thread id (continue a conversation).")] = None,
    events: Annotated[
        str, typer.Option(help="Output: 'table' (live) or 'jsonl' (one event per line).")
    ] = "table",
    db: DbOption = None,
    no_input: Annotated[
        bool,
        typer.Option(
            "--no-input", help="Never prompt: a paused run exits (code 4), resumable with `resume`."
        ),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option(help="Write every model request and reply and tool result to this file."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            help="Answer model calls and tools from a --record file (no network, no key); "
            "a request the recording lacks fails the run with a diff."
        ),
    ] = None,
) -> None:
    """Run a team on a request, showing a live table of steps and the final report."""
    settings = _settings(db)
    try:
        if record is not None and replay is not None:
            raise UsageError("--record and --replay: choose one")
        if replay is not None and not replay.is_file():
            raise UsageError(f"--replay {replay}: no such recording")
        spec_team = Team.from_yaml(team, settings=settings)
    except TeamgraphError as exc:
        raise _fail(exc) from None

    async def source(runner: Runner) -> AsyncIterator[Event]:
        stream = runner.stream(
            request, template=template, thread_id=thread, record=record, replay=replay
        )
        async for event in stream:
            yield event

    raise typer.Exit(_drive(spec_team, source, events, interactive=not no_input))


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="Id of the interrupted run.")],
    events: Annotated[str, typer.Option(help="'table' or 'jsonl'.")] = "table",
    db: DbOption = None,
    answer: Annotated[str | None, typer.Option(help="Answer to the run's question.")] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve the pending calls.")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject the pending calls.")] = False,
    comment: Annotated[str, typer.Option(help="Why (with --reject).")] = "",
    edit: Annotated[str | None, typer.Option(help="Run the call with these JSON args.")] = None,
    no_input: Annotated[bool, typer.Option("--no-input", help="Never prompt.")] = False,
) -> None:
    """Finish an interrupted or paused run without redoing what it had completed."""
    options = resume_options(answer, approve, reject, comment, edit)
    settings = _settings(db)
    try:
        row = asyncio.run(_get_run(settings, run_id))
        team = Team(team_from_dict(row["team_spec"], source=f"run {run_id}"), settings=settings)
    except TeamgraphError as exc:
        raise _fail(exc) from None

    async def source(runner: Runner) -> AsyncIterator[Event]:
        async for event in runner.resume_stream(run_id, **options):
            yield event

    raise typer.Exit(_drive(team, source, events, interactive=not no_input))


@app.command()
def diff(
    first: Annotated[str, typer.Argument(help="Id of a run.")],
    second: Annotated[str, typer.Argument(help="Id of the run to compare it with.")],
    db: DbOption = None,
) -> None:
    """Show where two runs differ: status, plan, every step's task and output, the answer and
    the cost (a unified diff; nothing, and exit code 0, when they agree)."""
    settings = _settings(db)
    try:
        text = asyncio.run(_diff(settings, first, second))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    if text:
        print(text)
    raise typer.Exit(1 if text else 0)


async def _diff(settings: Settings, first: str, second: str) -> str:
    from teamgraph.runtime.diff import diff_runs

    async with open_backend(settings) as backend:
        results = []
        for run_id in (first, second):
            row = await backend.runs.get(run_id)
            team = Team(team_from_dict(row.team_spec, source=f"run {run_id}"), settings=settings)
            results.append(await Runner(team.spec, backend, team.config).result(run_id))
    return diff_runs(*results)


async def _get_run(settings: Settings, run_id: str) -> dict[str, Any]:
    async with open_backend(settings) as backend:
        row = await backend.runs.get(run_id)
        return {"team_spec": row.team_spec}


def _drive(
    team: Team,
    source: Callable[[Runner], AsyncIterator[Event]],
    mode: str,
    interactive: bool = True,
) -> int:
    if mode not in ("table", "jsonl"):
        raise _fail(ValueError(f"--events must be 'table' or 'jsonl', not {mode!r}"))
    view = RunView()

    async def consume(events: AsyncIterator[Event]) -> None:
        if mode == "table":
            await _live(events, view)
            return
        async for event in events:
            view.apply(event)
            sys.stdout.write(event.model_dump_json() + "\n")
            sys.stdout.flush()

    async def main() -> None:
        async with team.runner() as runner:
            await consume(source(runner))
            while view.status == "interrupted":
                pending = await runner.pending(view.run_id)
                if not interactive:
                    err.print(escape(how_to_resume(view.run_id, pending)))
                    return
                await consume(runner.resume_stream(view.run_id, **ask(err, pending)))

    try:
        asyncio.run(main())
    except (TeamgraphError, EOFError) as exc:
        raise _fail(exc) from None
    if mode == "table":
        _report(view)
    return EXIT.get(view.status, 1)


async def _live(events: AsyncIterator[Event], view: RunView) -> None:
    with Live(_table(view), console=console, refresh_per_second=8, transient=False) as live:
        async for event in events:
            view.apply(event)
            if event.type != "token":
                live.update(_table(view))


def _table(view: RunView) -> Table:
    title = f"run {view.run_id[:12]}  plan: {view.plan_name or '…'}"
    if view.tier:
        title += f"  (tier {view.tier}, confidence {view.confidence:.2f})"
    table = Table(title=title, expand=False)
    for column in ("step", "state", "worker", "elapsed", "tokens", "detail"):
        table.add_column(column)
    for step in view.steps.values():
        elapsed = f"{step.elapsed_s:.1f}s" if step.elapsed_s is not None else ""
        table.add_row(
            step.id,
            f"[{STATE_STYLE[step.state]}]{step.state}[/]",
            step.worker,
            elapsed,
            str(step.tokens or ""),
            step.detail[:60],
        )
    table.caption = f"{view.status} · {view.usage.total_tokens} tokens · ${view.usage.cost_usd:.4f}"
    return table


def _report(view: RunView) -> None:
    if view.output:
        if console.is_terminal:
            console.print(Markdown(view.output))
        else:
            console.print(view.output, markup=False, highlight=False)
    for note in view.plan_notes:
        err.print(f"[dim]planner: {escape(note)}[/dim]")
    if view.error:
        err.print(f"[red]run failed:[/red] {escape(view.error)}")
    if view.status not in EXIT:
        err.print(f"run {view.run_id} stopped; continue it with: teamgraph resume {view.run_id}")
    console.print(
        f"[dim]run {view.run_id} · {view.status} · {view.usage.total_tokens} tokens · "
        f"${view.usage.cost_usd:.4f}[/dim]"
    )


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    db: DbOption = None,
) -> None:
    """Start the HTTP service (API, SSE streams, web workspace)."""
    import os

    from teamgraph.server.app import create_app
    from teamgraph.server.app import serve as serve_app

    os.environ.setdefault("TEAMGRAPH_JSON_LOGS", "true")
    serve_app(  # our request log line carries request ids: no access log
        create_app(_settings(db)), host, port, log_level="info", access_log=False
    )


db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the app tables, checkpoints and store to the latest schema."""

    async def upgrade() -> None:
        async with open_backend(_settings(db)):
            pass

    asyncio.run(upgrade())
    console.print("database is up to date")


@app.command()
def runs(
    limit: Annotated[int, typer.Option(help="How many runs to show.")] = 20,
    db: DbOption = None,
) -> None:
    """List recent runs with status, cost and duration."""
    rows = asyncio.run(_list_runs(_settings(db), limit))
    table = Table(title="runs")
    for column in (
        "id",
        "team",
        "status",
        "tier",
        "tokens",
        "cost",
        "duration",
        "started",
        "input",
    ):
        table.add_column(column)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


async def _list_runs(settings: Settings, limit: int) -> list[list[str]]:
    async with open_backend(settings) as backend:
        rows = await backend.runs.list(limit)
    out = []
    for r in rows:
        duration = f"{(r.finished_at - r.created_at).total_seconds():.1f}s" if r.finished_at else ""
        out.append(
            [
                r.id,
                r.team_name,
                r.status,
                r.planner_tier or "",
                str(r.input_tokens + r.output_tokens),
                f"${r.cost_usd:.4f}",
                duration,
                r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                r.input[:40],
            ]
        )
    return out


@app.command()
def templates(
    team: Annotated[
        Path | None, typer.Option("--team", "-t", help="Also list the team's templates_dirs.")
    ] = None,
) -> None:
    """List the workflow templates the planner knows."""
    settings = Settings()
    dirs: list[str | Path] = [BUILTIN_TEMPLATES_DIR, *settings.templates_dirs]
    try:
        if team is not None:
            dirs += Team.from_yaml(team, settings=settings).spec.workflow.templates_dirs
        found = load_templates(dirs)
    except TeamgraphError as exc:
        raise _fail(exc) from None
    table = Table(title="templates")
    table.add_column("name")
    table.add_column("description")
    table.add_column("steps")
    for name, tpl in sorted(found.items()):
        table.add_row(Text(name), Text(tpl.description), Text(" → ".join(s.id for s in tpl.steps)))
    console.print(table)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Markdown/text files or folders.")],
    team: Annotated[
        str | None,
        typer.Option(help="Only this team's runs search them (default: every team's)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Index documents for the search_docs tool (incremental: unchanged files are skipped)."""
    from teamgraph.knowledge import SHARED, KnowledgeBase
    from teamgraph.runtime.runner import team_collection

    try:
        kb = KnowledgeBase(_settings(db).sqlite_path)
        report = kb.ingest(paths, team_collection(team) if team else SHARED)
    except (FileNotFoundError, TeamgraphError, ValueError) as exc:
        raise _fail(exc) from None
    console.print(
        f"indexed {report.files_indexed} file(s), {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed; {report.chunks} chunk(s) written; "
        f"{kb.count()} chunk(s) in the index"
    )


if __name__ == "__main__":
    app()
