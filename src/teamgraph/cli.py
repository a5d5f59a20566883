"""``teamgraph`` — run teams, resume runs, list runs and templates, ingest documents."""

from __future__ import annotations

import sys
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar

import typer

from teamgraph.cli_errors import debugging, explain
from teamgraph.errors import TeamgraphError, UsageError

if TYPE_CHECKING:  # the heavy modules load inside the commands: `--help` stays fast
    from rich.console import Console
    from rich.table import Table

    from teamgraph.config import Settings
    from teamgraph.events import Event, RunStatus
    from teamgraph.result import RunResult
    from teamgraph.runtime.runner import Runner
    from teamgraph.runtime.team_api import Team
    from teamgraph.runtime.view import RunView
    from teamgraph.storage.models import RunRow

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
TeamOption = Annotated[
    str | None, typer.Option("--team", "-t", help="A team's own collection (its runs only).")
]
CollectionOption = Annotated[
    str | None,
    typer.Option(
        "--collection",
        "-c",
        help="A named collection (default: 'default'), read by the teams "
        "that list it under `collections`.",
    ),
]
SharedOption = Annotated[
    bool, typer.Option("--shared", help="The shared collection: every team's runs search it.")
]
RunTeamOption = Annotated[
    str,
    typer.Option(
        "--team",
        "-t",
        help="Team YAML file, or the name of a team (research, assistant, helpdesk, …).",
    ),
]
TemplateOption = Annotated[str | None, typer.Option(help="Workflow template to plan with.")]
ThreadOption = Annotated[str | None, typer.Option(help="Thread id (continue a conversation).")]
RunEventsOption = Annotated[
    str, typer.Option(help="Output: 'table' (live) or 'jsonl' (one event per line).")
]
RunNoInputOption = Annotated[
    bool,
    typer.Option(
        "--no-input", help="Never prompt: a paused run exits (code 4), resumable with `resume`."
    ),
]
RecordOption = Annotated[
    Path | None,
    typer.Option(help="Write every model request and reply and tool result to this file."),
]
ReplayOption = Annotated[
    Path | None,
    typer.Option(
        help="Answer model calls and tools from a --record file (no network, no key); "
        "a request the recording lacks fails the run with a diff."
    ),
]
DEFAULT_COLLECTION = "default"
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
    """``--team``: a YAML file, or a team of the teams folders (the example teams shipped with
    the package by default) by its name (``name:`` in its file, as runs, the workspace and the
    API show it) or, for compatibility, by its file's name."""
    from teamgraph.runtime.team_api import Team

    path = _team_file(value, settings)
    if path.is_dir():
        raise UsageError(f"--team {value}: a folder; name a team's YAML file")
    return Team.from_yaml(path, settings=settings)


def _team_file(value: str, settings: Settings) -> Path:
    path = Path(value)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    named = _teams_by_name(settings)
    if value in named:
        return named[value]
    stems = {f.stem: f for f in named.values()}
    if value in stems:
        return stems[value]
    import difflib

    near = difflib.get_close_matches(value, [*named, *stems], n=1)
    hint = f" — did you mean {near[0]!r}?" if near else ""
    raise UsageError(
        f"--team {value}: no such file, and no team {value!r} in "
        f"{', '.join(settings.teams_dirs)}{hint} (teams: {', '.join(sorted(named))})"
    )


def _teams_by_name(settings: Settings) -> dict[str, Path]:
    """The YAML files of the teams folders by the ``name:`` each declares (a later folder's
    team overrides an earlier one's, as the server loads them); a file that does not read as a
    team is left to the loader to report when it is asked for."""
    import yaml

    found: dict[str, Path] = {}
    for folder in settings.teams_dirs:
        for file in sorted(Path(folder).glob("*.y*ml")) if Path(folder).is_dir() else []:
            try:
                raw = yaml.safe_load(file.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError):
                continue
            name = raw.get("name") if isinstance(raw, dict) else None
            found[name if isinstance(name, str) and name else file.stem] = file
    return found


def _team_name(value: str, settings: Settings) -> str:
    """The name of the team ``--team value`` means (its YAML ``name:``)."""
    return _team(value, settings).spec.name


@app.command()
def run(
    request: Annotated[str, typer.Argument(help="What the team should do.")],
    team: RunTeamOption = "research",
    template: TemplateOption = None,
    thread: ThreadOption = None,
    events: RunEventsOption = "table",
    db: DbOption = None,
    no_input: RunNoInputOption = False,
    record: RecordOption = None,
    replay: ReplayOption = None,
) -> None:
    """Run a team on a request, showing a live table of steps and the final report."""
    settings = _settings(db)
    try:
        spec_team = _team_to_run(settings, request, team, template, record, replay)
    except TeamgraphError as exc:
        raise _fail(exc) from None

    async def source(runner: Runner) -> AsyncIterator[Event]:
        stream = runner.stream(
            request, template=template, thread_id=thread, record=record, replay=replay
        )
        async for event in stream:
            yield event

    raise typer.Exit(_drive(spec_team, source, events, interactive=not no_input))


def _team_to_run(
    settings: Settings,
    request: str,
    team: str,
    template: str | None,
    record: Path | None,
    replay: Path | None,
) -> Team:
    """The team ``run`` runs, once its arguments are checked (:class:`UsageError` naming the
    wrong one, before anything is stored)."""
    if record is not None and replay is not None:
        raise UsageError("--record and --replay: choose one")
    if replay is not None and not replay.is_file():
        raise UsageError(f"--replay {replay}: no such recording")
    if not request.strip():
        raise UsageError("the request is empty: say what the team should do")
    spec_team = _team(team, settings)
    if template is not None:
        _check_template(spec_team, template)
    return spec_team


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
    from teamgraph.runtime.team_api import Team
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
            chosen = _prompt(ask, pending) if pending else options
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
    from teamgraph.result import diff_runs

    one, other = await _stored_results(settings, first, second)
    return diff_runs(one[1], other[1])


async def _stored_results(settings: Settings, *given: str) -> list[tuple[RunRow, RunResult]]:
    """The stored runs ``given`` (ids or unambiguous prefixes), each with its result."""
    from teamgraph.runtime.backend import open_backend
    from teamgraph.runtime.runner import Runner
    from teamgraph.runtime.team_api import Team
    from teamgraph.specs.loader import team_from_dict

    async with open_backend(settings) as backend:
        found = []
        for run in given:
            row = await backend.runs.get(await backend.runs.resolve(run))
            team = Team(team_from_dict(row.team_spec, source=f"run {row.id}"), settings=settings)
            found.append((row, await Runner(team.spec, backend, team.config).result(row.id)))
    return found


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="Id of a run, or any unambiguous prefix.")],
    db: DbOption = None,
) -> None:
    """Print a stored run: its request, status, steps, answer and cost."""
    from teamgraph.result import describe

    settings = _settings(db)
    try:
        [(row, result)] = _run_async(_stored_results(settings, run_id))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    print(f"run {row.id} · team {row.team_name} · {row.created_at:%Y-%m-%d %H:%M}")
    print(f"request: {row.input}")
    print("\n".join(describe(result)))


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
    from teamgraph.status import FINISHED

    if mode not in ("table", "jsonl"):
        raise _fail(UsageError(f"--events must be 'table' or 'jsonl', not {mode!r}"))
    view = RunView()
    try:
        _run_async(_execute(team, source, view, mode, interactive))
    except PromptStopped:  # before KeyboardInterrupt: the run waits, nothing was cancelled
        return _stopped(view, "waits: stopped at the prompt (Ctrl-C)", 130)
    except KeyboardInterrupt:
        if view.status in FINISHED:  # it ended as Ctrl-C came: it is not cancelled
            if mode == "table":
                _report(view)
            return EXIT.get(view.status, 1)
        return _stopped(view, "cancelled (Ctrl-C)", 130)
    except EOFError:
        return _stopped(view, "waits: the input ended before an answer", EXIT["interrupted"])
    except TeamgraphError as exc:
        raise _fail(exc) from None
    if mode == "table":
        _report(view)
    return EXIT.get(view.status, 1)


class PromptStopped(Exception):
    """Ctrl-C at a prompt: the run waits for its answer."""


def _prompt(
    ask: Callable[[Console, list[dict[str, Any]]], dict[str, Any]], pending: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ask in the terminal; Ctrl-C stops at once. (The event loop's own Ctrl-C handler only
    cancels its task once the blocking prompt returns: the first Ctrl-C was lost.)"""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return ask(_err(), pending)
    except KeyboardInterrupt:
        raise PromptStopped from None
    finally:
        signal.signal(signal.SIGINT, previous)


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
            answer = _prompt(ask, pending)
            await _consume(runner.resume_stream(view.run_id, **answer), view, mode)


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
        _port_free(host, port)
        _run_async(_preflight(settings))
    except TeamgraphError as exc:
        raise _fail(exc) from None
    os.environ.setdefault("TEAMGRAPH_JSON_LOGS", "true")
    with _worker_processes(workers or 0, settings):
        serve_app(  # our request log line carries request ids: no access log
            create_app(settings),
            host,
            port,
            trusted_proxies=settings.trusted_proxies,
            log_level="info",
            access_log=False,
        )


@contextmanager
def _worker_processes(count: int, settings: Settings) -> Iterator[None]:
    """``count`` ``teamgraph worker`` processes beside the server, stopped (SIGTERM) after it —
    also when the server is ended by a signal (uvicorn re-raises SIGTERM/SIGINT once it has
    shut down, which ends this process before it can stop them): on Linux the kernel sends each
    worker SIGTERM when this process exits (``PR_SET_PDEATHSIG``), and each drains as usual."""
    import os
    import subprocess

    env = {**os.environ, "DATABASE_URL": settings.database_url}
    command = [sys.executable, "-m", "teamgraph", "worker"]
    children = [
        subprocess.Popen(command, env=env, preexec_fn=_stopped_with_parent) for _ in range(count)
    ]
    try:
        yield
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.wait()


def _stopped_with_parent() -> None:
    """In a child, before it executes: SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    import ctypes
    import signal

    with suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))


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


def _port_free(host: str, port: int) -> None:
    """Raise :class:`UsageError` when ``host:port`` cannot be bound (in use, or not ours)."""
    import os
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise UsageError(
            f"cannot listen on {host}:{port}: {why} — choose another with --port (or --host)"
        ) from None


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
        str | None,
        typer.Option(
            "--team",
            "-t",
            help="Only the templates this team can run (and its templates_dirs' too).",
        ),
    ] = None,
) -> None:
    """List the workflow templates the planner knows (with --team: those the team can run, and
    why the others cannot)."""
    from rich.table import Table
    from rich.text import Text

    from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates, misfit

    settings = _settings(None)
    dirs: list[str | Path] = [BUILTIN_TEMPLATES_DIR, *settings.templates_dirs]
    try:
        chosen = _team(team, settings) if team is not None else None
        if chosen is not None:
            dirs += chosen.spec.workflow.templates_dirs
        found = load_templates(dirs)
    except TeamgraphError as exc:
        raise _fail(exc) from None
    members = [m.name for m in chosen.spec.members] if chosen is not None else []
    unfit = {name: misfit(tpl, members) for name, tpl in found.items()} if chosen else {}
    title = f"templates team {chosen.spec.name!r} can run" if chosen else "templates"
    table = Table(title=title)
    table.add_column("name")
    table.add_column("description")
    table.add_column("steps")
    for name, tpl in sorted(found.items()):
        if not unfit.get(name):
            steps = " → ".join(s.id for s in tpl.steps)
            table.add_row(Text(name), Text(tpl.description), Text(steps))
    _out().print(table)
    for name, why in sorted(unfit.items()):
        if why:
            _out().print(f"not {name}: {why.removeprefix(f'template {name!r} ')}", soft_wrap=True)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Markdown/text files or folders.")],
    team: TeamOption = None,
    collection: CollectionOption = None,
    shared: SharedOption = False,
    db: DbOption = None,
) -> None:
    """Index documents for the search_docs tool (incremental: unchanged files are skipped), into
    a named collection (``default`` unless --collection, --team or --shared says otherwise):
    only the teams that list it under ``collections`` search it."""
    from teamgraph.knowledge import KnowledgeBase

    try:
        settings = _settings(db)
        where = _collection(team, collection, shared, settings)
        kb = KnowledgeBase(settings.sqlite_path, settings)
        report = kb.ingest(paths, where.id)
    except (OSError, TeamgraphError, ValueError) as exc:
        raise _fail(exc) from None
    _out().print(
        f"indexed {report.files_indexed} file(s), {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed; {report.chunks} chunk(s) written; "
        f"{kb.count()} chunk(s) in the index; {where.id}: {where.readers}",
        soft_wrap=True,
    )


knowledge_app = typer.Typer(
    help="The documents `ingest` indexed: list them, remove them.", no_args_is_help=True
)
app.add_typer(knowledge_app, name="knowledge")


class _Collection(NamedTuple):
    id: str  # as the index keeps it: collection:NAME, team:NAME or shared
    readers: str  # whose runs search it, in words


def _collection(
    team: str | None, name: str | None, shared: bool, settings: Settings
) -> _Collection:
    """The collection ``--team``, ``--collection`` or ``--shared`` names (at most one of them;
    none: the ``default`` collection)."""
    import re

    from teamgraph.knowledge import SHARED
    from teamgraph.runtime.runner import named_collection, team_collection
    from teamgraph.specs.team import COLLECTION_NAME

    if sum((team is not None, name is not None, shared)) > 1:
        raise UsageError("name one collection: --team, --collection or --shared")
    if team is not None:
        team_name = _team_name(team, settings)
        return _Collection(team_collection(team_name), f"team {team_name!r}'s runs search it")
    if shared:
        return _Collection(SHARED, "every team's runs search it")
    name = DEFAULT_COLLECTION if name is None else name
    if not re.match(COLLECTION_NAME, name):
        raise UsageError(f"--collection {name!r}: use letters, digits, '_', '.', '-' (≤ 64)")
    readers = _readers(name, settings)
    return _Collection(
        named_collection(name),
        f"searched by team(s) {', '.join(readers)}"
        if readers
        else f"no team searches it yet: list it in a team's YAML (collections: [{name}]), "
        "or ingest with --team NAME (one team) or --shared (every team)",
    )


def _readers(name: str, settings: Settings) -> list[str]:
    """The teams of the teams folders whose YAML lists the named collection."""
    import yaml

    found = []
    for team, file in sorted(_teams_by_name(settings).items()):
        try:
            raw = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and name in (raw.get("collections") or []):
            found.append(team)
    return found


@knowledge_app.command("list")
def knowledge_list(
    team: TeamOption = None,
    collection: CollectionOption = None,
    shared: SharedOption = False,
    db: DbOption = None,
) -> None:
    """The documents of a collection (as `ingest`: the ``default`` one unless --collection,
    --team or --shared), and which teams search it."""
    from rich.table import Table
    from rich.text import Text

    from teamgraph.knowledge import KnowledgeBase

    try:
        settings = _settings(db)
        where = _collection(team, collection, shared, settings)
        documents = KnowledgeBase(settings.sqlite_path, settings).documents(where.id)
    except (OSError, TeamgraphError, ValueError) as exc:
        raise _fail(exc) from None
    table = Table(title=f"{where.id}: {len(documents)} document(s); {where.readers}")
    for column in ("id", "name", "source", "chunks", "added"):
        table.add_column(column)
    for d in documents:
        table.add_row(str(d.id), Text(d.name), Text(d.source), str(d.chunks), d.added_at[:16])
    _out().print(table)


@knowledge_app.command("remove")
def knowledge_remove(
    what: Annotated[
        list[str], typer.Argument(help="Document ids, or files and folders as ingested.")
    ],
    team: TeamOption = None,
    collection: CollectionOption = None,
    shared: SharedOption = False,
    db: DbOption = None,
) -> None:
    """Remove documents from a collection (as `ingest`: the ``default`` one unless
    --collection, --team or --shared): by id, or every document ingested from a file or
    folder."""
    from teamgraph.knowledge import KnowledgeBase

    try:
        settings = _settings(db)
        where = _collection(team, collection, shared, settings)
        kb = KnowledgeBase(settings.sqlite_path, settings)
        documents = kb.documents(where.id)
        chosen = {d.id for item in what for d in documents if _names(item, d.id, d.source)}
        missing = [i for i in what if not any(_names(i, d.id, d.source) for d in documents)]
        if missing:
            raise UsageError(f"no document {', '.join(map(repr, missing))} in {where.id}")
        for document_id in sorted(chosen):
            kb.delete(where.id, document_id)
    except (OSError, TeamgraphError, ValueError) as exc:
        raise _fail(exc) from None
    _out().print(f"removed {len(chosen)} document(s) from {where.id}; {kb.count()} chunk(s) left")


def _names(item: str, document_id: int, source: str) -> bool:
    """Whether ``item`` (an id, or a file or folder) names the document."""
    if item == str(document_id):
        return True
    where = Path(item).resolve()
    return Path(source) == where or Path(source).is_relative_to(where)


if __name__ == "__main__":
    main()
