"""``teamgraph`` — run teams, resume runs, list runs and templates, ingest documents."""

from __future__ import annotations

import sys
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from teamgraph.cli_errors import debugging, explain
from teamgraph.errors import TeamgraphError, UsageError

if TYPE_CHECKING:  # the heavy modules load inside the commands: `--help` stays fast
    from rich.console import Console
    from rich.table import Table

    from teamgraph.config import Settings
    from teamgraph.events import Event, RunStatus
    from teamgraph.runtime.runner import Runner
    from teamgraph.runtime.team import Team
    from teamgraph.runtime.view import RunView

app = typer.Typer(
    help="Run durable, streamed, cost-tracked teams of AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # main() turns every failure into one line
    rich_markup_mode=None,  # plain help: rich's help panels cost 0.13 s of imports per call
)
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

T = TypeVar("T")
SHORT_ID = 12  # how runs are shown; any unambiguous prefix of an id names its run

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: DATABASE_URL or sqlite:///./teamgraph.db)."),
]
_used: dict[str, str] = {}  # the database URL the command uses, for the error line


def _out() -> Console:
    """A stdout console, made when output is due: rich loads only then, and the console sizes
    itself to the terminal (or ``COLUMNS``) as it is now."""
    from rich.console import Console

    return Console()


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True)


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of a failure.")
    ] = False,
) -> None:
    if debug:
        import os

        os.environ["TEAMGRAPH_DEBUG"] = "1"


def main() -> None:
    """The ``teamgraph`` command: every failure is one line on stderr and an exit code."""
    try:
        app()
    except Exception as exc:
        raise SystemExit(_fail(exc).exit_code) from None


def _run_async(work: Coroutine[Any, Any, T]) -> T:
    import asyncio  # here: `--help` does not need the event loop's 40 ms of imports

    return asyncio.run(work)


def _settings(db: str | None) -> Settings:
    from teamgraph.config import Settings

    settings = Settings(database_url=db) if db else Settings()
    _used["db"] = settings.database_url
    return settings


def _fail(exc: BaseException) -> typer.Exit:
    """Say ``exc`` in one line (after its traceback with ``--debug``); the exit to raise."""
    from rich.markup import escape

    if debugging():
        traceback.print_exception(exc)
    failure = explain(exc, _used.get("db", ""))
    _err().print(f"[red]error:[/red] {escape(failure.line)}", soft_wrap=True)
    return typer.Exit(failure.code)


def _team(value: str, settings: Settings) -> Team:
    """``--team``: a YAML file, or the name of a team in the teams folders (the example teams
    shipped with the package by default)."""
    from teamgraph.runtime.team import Team

    path = Path(value)
    if path.suffix not in (".yaml", ".yml") and not path.exists():
        found = [
            Path(d) / f"{value}{ext}" for d in settings.teams_dirs for ext in (".yaml", ".yml")
        ]
        named = next((f for f in found if f.is_file()), None)
        if named is None:
            raise UsageError(
                f"--team {value}: no such file, and no team {value!r} in "
                f"{', '.join(settings.teams_dirs)}"
            )
        path = named
    if path.is_dir():
        raise UsageError(f"--team {value}: a folder; name a team's YAML file")
    return Team.from_yaml(path, settings=settings)


@app.command()
def run(
    request: Annotated[str, typer.Argument(help="What the team should do.")],
    team: Annotated[
        str,
        typer.Option(
            "--team", "-t", help="Team YAML file, or the name of a team (research, notebook, …)."
        ),
    ] = "research",
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
        if not request.strip():
            raise UsageError("the request is empty: say what the team should do")
        spec_team = _team(team, settings)
        if template is not None:
            _check_template(spec_team, template)
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
    """Finish an interrupted or paused run without redoing what it had completed (RUN_ID: the
    id or any unambiguous prefix of it, such as the 12 characters `runs` shows)."""
    from teamgraph.cli_pauses import resume_options
    from teamgraph.runtime.team import Team
    from teamgraph.specs.loader import team_from_dict

    options = resume_options(answer, approve, reject, comment, edit)
    settings = _settings(db)
    try:
        run_id, spec = _run_async(_get_run(settings, run_id))
        team = Team(team_from_dict(spec, source=f"run {run_id}"), settings=settings)
    except TeamgraphError as exc:
        raise _fail(exc) from None

    async def source(runner: Runner) -> AsyncIterator[Event]:
        chosen = options
        if not no_input and options["answer"] is None and options["default"] is None:
            from teamgraph.cli_pauses import ask

            pending = await runner.pending(run_id)  # a paused run: ask here, as `run` does
            chosen = ask(_err(), pending) if pending else options
        async for event in runner.resume_stream(run_id, **chosen):
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
        text = _run_async(_diff(settings, first, second))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    if text:
        print(text)
    raise typer.Exit(1 if text else 0)


async def _diff(settings: Settings, first: str, second: str) -> str:
    from teamgraph.runtime.backend import open_backend
    from teamgraph.runtime.diff import diff_runs
    from teamgraph.runtime.runner import Runner
    from teamgraph.runtime.team import Team
    from teamgraph.specs.loader import team_from_dict

    async with open_backend(settings) as backend:
        results = []
        for given in (first, second):
            row = await backend.runs.get(await backend.runs.resolve(given))
            team = Team(team_from_dict(row.team_spec, source=f"run {row.id}"), settings=settings)
            results.append(await Runner(team.spec, backend, team.config).result(row.id))
    return diff_runs(*results)


async def _get_run(settings: Settings, given: str) -> tuple[str, dict[str, Any]]:
    """The full id of the run ``given`` names (an id or a prefix) and its team's spec."""
    from teamgraph.runtime.backend import open_backend

    async with open_backend(settings) as backend:
        row = await backend.runs.get(await backend.runs.resolve(given))
        return row.id, row.team_spec


def _check_template(team: Team, name: str) -> None:
    """A template that cannot plan for the team fails before the run (naming what is missing)."""
    from teamgraph.planning.templates import available, misfit

    spec = team.spec
    if spec.pattern != "workflow":
        raise UsageError(f"--template {name}: team {spec.name!r} is not a workflow team")
    found = available(team.settings.templates_dirs, spec.workflow.templates_dirs)
    if name not in found:
        raise UsageError(f"--template {name}: no such template; templates: {', '.join(found)}")
    if why := misfit(found[name], [m.name for m in spec.members]):
        raise UsageError(f"--template {name}: {why}")


def _drive(
    team: Team,
    source: Callable[[Runner], AsyncIterator[Event]],
    mode: str,
    interactive: bool = True,
) -> int:
    from teamgraph.runtime.view import RunView

    if mode not in ("table", "jsonl"):
        raise _fail(UsageError(f"--events must be 'table' or 'jsonl', not {mode!r}"))
    view = RunView()
    try:
        _run_async(_execute(team, source, view, mode, interactive))
    except KeyboardInterrupt:
        return _stopped(view, "cancelled (Ctrl-C)", 130)
    except EOFError:
        return _stopped(view, "waits: the input ended before an answer", EXIT["interrupted"])
    except TeamgraphError as exc:
        raise _fail(exc) from None
    if mode == "table":
        _report(view)
    return EXIT.get(view.status, 1)


async def _execute(
    team: Team,
    source: Callable[[Runner], AsyncIterator[Event]],
    view: RunView,
    mode: str,
    interactive: bool,
) -> None:
    """The run to its end, asking in the terminal whenever it pauses (``interactive``)."""
    from teamgraph.cli_pauses import ask, how_to_resume

    async with team.runner() as runner:
        await _consume(source(runner), view, mode)
        while view.status == "interrupted":
            pending = await runner.pending(view.run_id)
            if not interactive:
                _err().print(how_to_resume(view.run_id, pending), markup=False)
                return
            await _consume(runner.resume_stream(view.run_id, **ask(_err(), pending)), view, mode)


async def _consume(events: AsyncIterator[Event], view: RunView, mode: str) -> None:
    if mode == "table":
        await _live(events, view)
        return
    async for event in events:
        view.apply(event)
        sys.stdout.write(event.encoded + "\n")
        sys.stdout.flush()


def _stopped(view: RunView, what: str, code: int) -> int:
    if not view.run_id:
        _err().print(f"stopped before the run started: {what}", markup=False, soft_wrap=True)
        return code
    short = view.run_id[:SHORT_ID]
    _err().print(
        f"run {short} {what}; continue it with: teamgraph resume {short}",
        markup=False,
        soft_wrap=True,
    )
    return code


async def _live(events: AsyncIterator[Event], view: RunView) -> None:
    """The live table, shown from the run's first event (an error before it prints no table)."""
    from rich.live import Live

    iterator = aiter(events)
    first = await anext(iterator, None)
    if first is None:
        return
    view.apply(first)
    console = _out()
    with Live(_table(view), console=console, refresh_per_second=8, transient=False) as live:
        async for event in iterator:
            view.apply(event)
            if event.type != "token":
                live.update(_table(view))
    if not console.is_terminal:
        console.print()  # piped: the table's last line ends before the report begins


def _table(view: RunView) -> Table:
    from rich.markup import escape
    from rich.table import Table

    title = f"run {view.run_id[:SHORT_ID]}"
    if view.plan_name:
        title += f"  plan: {view.plan_name}"
    if view.tier:
        title += f"  (tier {view.tier}, confidence {view.confidence:.2f})"
    table = Table(title=title, expand=False)
    caption = f"{view.status} · {view.usage.total_tokens} tokens · ${view.usage.cost_usd:.4f}"
    if not view.steps and view.agents:  # no plan (single, supervisor, swarm…): its agents
        for column in ("agent", "state", "tokens", "detail"):
            table.add_column(column)
        for agent in view.agents.values():
            state = f"[{STATE_STYLE[agent.state]}]{agent.state}[/]"
            table.add_row(agent.name, state, str(agent.tokens or ""), escape(agent.detail))
        table.caption = caption
        return table
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
    table.caption = caption
    return table


def _report(view: RunView) -> None:
    from rich.markdown import Markdown
    from rich.markup import escape

    console, err = _out(), _err()
    if view.output:
        if console.is_terminal:
            console.print(Markdown(view.output))
        else:
            console.print(view.output, markup=False, highlight=False)
    for note in view.plan_notes:
        err.print(f"[dim]planner: {escape(note)}[/dim]")
    if view.error:
        err.print(f"[red]run failed:[/red] {escape(view.error)}")
    short = view.run_id[:SHORT_ID]
    if view.status not in EXIT:
        err.print(f"run {short} stopped; continue it with: teamgraph resume {short}")
    console.print(
        f"[dim]run {short} · {view.status} · {view.usage.total_tokens} tokens · "
        f"${view.usage.cost_usd:.4f}[/dim]"
    )


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    db: DbOption = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Queue runs for worker processes instead of executing them here (PostgreSQL): "
            "0 = API only (start `teamgraph worker` yourself), N = also start N workers.",
        ),
    ] = None,
) -> None:
    """Start the HTTP service (API, SSE streams, web workspace) on the teams of
    TEAMGRAPH_TEAMS_DIRS (default: the example teams shipped with the package)."""
    import os

    from teamgraph.server.app import create_app
    from teamgraph.server.app import serve as serve_app

    settings = _settings(db)
    if workers is not None:
        settings = settings.model_copy(update={"execute_runs": False})
    try:  # the teams and the database first: a mistake is one line, not a start-up traceback
        if workers is not None:
            settings.require_postgres("--workers")
        _run_async(_preflight(settings))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    os.environ.setdefault("TEAMGRAPH_JSON_LOGS", "true")
    with _worker_processes(workers or 0, settings):
        serve_app(  # our request log line carries request ids: no access log
            create_app(settings), host, port, log_level="info", access_log=False
        )


@contextmanager
def _worker_processes(count: int, settings: Settings) -> Iterator[None]:
    """``count`` ``teamgraph worker`` processes beside the server, stopped (SIGTERM) after it."""
    import os
    import subprocess

    env = {**os.environ, "DATABASE_URL": settings.database_url}
    command = [sys.executable, "-m", "teamgraph", "worker"]
    children = [subprocess.Popen(command, env=env) for _ in range(count)]
    try:
        yield
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.wait()


@app.command()
def worker(
    db: DbOption = None,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Runs executed at once (TEAMGRAPH_WORKER_CONCURRENCY)."),
    ] = None,
    health_port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Serve /health, /ready and /metrics on this port."),
    ] = None,
) -> None:
    """Execute queued runs (no HTTP API) beside `teamgraph serve --workers 0`, on PostgreSQL.
    SIGTERM drains: no new runs, running ones finish or go to another worker."""
    import os

    from teamgraph.server.worker import run_worker

    settings = _settings(db)
    update: dict[str, Any] = {}
    if concurrency is not None:
        update["worker_concurrency"] = concurrency
    if health_port is not None:
        update["worker_health_port"] = health_port
    settings = settings.model_copy(update=update)
    try:
        settings.require_postgres("teamgraph worker")
        _run_async(_preflight(settings))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    os.environ.setdefault("TEAMGRAPH_JSON_LOGS", "true")
    run_worker(settings)


async def _preflight(settings: Settings) -> None:
    from teamgraph.runtime.backend import open_backend
    from teamgraph.server.state import load_teams

    load_teams(settings)
    async with open_backend(settings):  # reachable, and migrated
        pass


db_app = typer.Typer(help="Database schema.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the app tables, checkpoints and store to the latest schema."""
    from teamgraph.runtime.backend import open_backend

    settings = _settings(db)

    async def upgrade() -> None:
        async with open_backend(settings):
            pass

    _run_async(upgrade())
    _out().print("database is up to date")


@app.command()
def runs(
    limit: Annotated[int, typer.Option(help="How many runs to show.")] = 20,
    db: DbOption = None,
) -> None:
    """List recent runs with status, tokens and cost (ids shortened: `resume` and `diff`
    take them, or any unambiguous prefix)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    rows = _run_async(_list_runs(_settings(db), limit))
    console = _out()
    table = Table(title="runs", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    headers = ("id", "team", "status", "tokens", "cost", "started")
    widths = [min(max([len(h), *(len(row[i]) for row in rows)]), 14) for i, h in enumerate(headers)]
    for name, width in zip(headers, widths, strict=True):
        table.add_column(
            name,
            no_wrap=True,
            overflow="ellipsis",
            width=width,
            justify="right" if name in ("tokens", "cost") else "left",
        )
    # the input takes what the terminal has left (two spaces between columns)
    room = max(8, console.width - sum(widths) - 2 * len(widths) - 1)
    table.add_column("input", no_wrap=True, overflow="ellipsis", max_width=room)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


async def _list_runs(settings: Settings, limit: int) -> list[list[str]]:
    from teamgraph.runtime.backend import open_backend

    async with open_backend(settings) as backend:
        rows = await backend.runs.list(limit)
    out = []
    for r in rows:
        out.append(
            [
                r.id[:SHORT_ID],
                r.team_name,
                r.status,
                str(r.input_tokens + r.output_tokens),
                f"${r.cost_usd:.4f}",
                r.created_at.strftime("%m-%d %H:%M"),
                " ".join(r.input.split()),
            ]
        )
    return out


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Remove runs unchanged for this long: 30d, 12h, 90m, 45s."
        ),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option(
            help="Only runs in this status (repeat it; default: every status of a run that "
            "ended — completed, completed_with_errors, failed, cancelled, budget_exceeded; "
            "paused runs (interrupted) only when named)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the runs, remove nothing.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Remove old runs whole: row, events, messages, step records, journal and checkpoints,
    a batch at a time (live runs go on); a SQLite file gives the space back."""
    from teamgraph.runtime.backend import open_backend
    from teamgraph.runtime.retention import PRUNED, parse_age
    from teamgraph.runtime.retention import prune as prune_runs

    settings = _settings(db)

    async def work() -> Any:
        async with open_backend(settings) as backend:
            return await prune_runs(backend, age, statuses, dry_run=dry_run)

    try:
        age, statuses = parse_age(older_than), _statuses(status) if status else PRUNED
        pruned = _run_async(work())
    except TeamgraphError as exc:
        raise _fail(exc) from None
    verb = "would remove" if dry_run else "removed"
    shown = ", ".join(run[:SHORT_ID] for run in pruned.run_ids)
    more = ", …" if pruned.runs > len(pruned.run_ids) else ""
    _out().print(f"{verb} {pruned.runs} run(s)" + (f": {shown}{more}" if shown else ""))
    if pruned.pages:
        _out().print(f"gave {pruned.pages} page(s) back to the file system")


def _statuses(given: list[str]) -> frozenset[RunStatus]:
    from typing import get_args

    from teamgraph.status import RunStatus as Status

    known = get_args(Status)
    unknown = [s for s in given if s not in known]
    if unknown:
        raise UsageError(f"--status {unknown[0]!r}: a status is one of {', '.join(known)}")
    return frozenset(given)  # type: ignore[arg-type]


@app.command()
def templates(
    team: Annotated[
        Path | None, typer.Option("--team", "-t", help="Also list the team's templates_dirs.")
    ] = None,
) -> None:
    """List the workflow templates the planner knows."""
    from rich.table import Table
    from rich.text import Text

    from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates

    settings = _settings(None)
    dirs: list[str | Path] = [BUILTIN_TEMPLATES_DIR, *settings.templates_dirs]
    try:
        if team is not None:
            dirs += _team(str(team), settings).spec.workflow.templates_dirs
        found = load_templates(dirs)
    except TeamgraphError as exc:
        raise _fail(exc) from None
    table = Table(title="templates")
    table.add_column("name")
    table.add_column("description")
    table.add_column("steps")
    for name, tpl in sorted(found.items()):
        table.add_row(Text(name), Text(tpl.description), Text(" → ".join(s.id for s in tpl.steps)))
    _out().print(table)


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
        settings = _settings(db)
        kb = KnowledgeBase(settings.sqlite_path, settings)
        report = kb.ingest(paths, team_collection(team) if team else SHARED)
    except (OSError, TeamgraphError, ValueError) as exc:
        raise _fail(exc) from None
    _out().print(
        f"indexed {report.files_indexed} file(s), {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed; {report.chunks} chunk(s) written; "
        f"{kb.count()} chunk(s) in the index"
    )


if __name__ == "__main__":
    main()
