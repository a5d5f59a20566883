"""The run manager: the server's runs as asyncio tasks on one cached runner per team, their
events in an ``EventLog`` for readers.

A live run's life is an explicit state machine (:data:`Phase`, :data:`NEXT`): claimed →
executing → (stopping →) closing → closed; every transition goes through ``_Live.enter``. A run's
task executes with its id bound for the logs (:func:`~teamgraph.server.logging.bind_run`): every
line logged while it executes — by the runner, a tool, the manager — carries ``run_id``.

A run that a database outage stopped (it wrote nothing more and stays ``running``) is resumed
here from its last checkpoint once the database answers again — nothing finished is redone —
without a restart or a human; :meth:`RunManager.finished` waits for that resumed execution too."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from teamgraph.errors import RunConflict
from teamgraph.events import BaseEvent, Event, RunCompleted
from teamgraph.runtime import event_log as rl
from teamgraph.runtime.retention import compact
from teamgraph.runtime.runner import Runner, check_request
from teamgraph.runtime.team_api import Team
from teamgraph.server import repositories as repo
from teamgraph.server.logging import bind_run
from teamgraph.server.state import AppState
from teamgraph.status import OPEN, PAUSED, RunStatus
from teamgraph.storage.direct import Statement
from teamgraph.storage.models import RunRow, SessionRow, utcnow
from teamgraph.storage.outages import is_outage, until_reachable

log = logging.getLogger(__name__)


Phase = Literal["claimed", "executing", "stopping", "closing", "closed"]
# claimed:   the session is taken; the run is being checked and stored
# executing: its task runs the graph; events flow into its log
# stopping:  cancel was asked; the task is being cancelled
# closing:   its stream ended: the last events are stored, the answer kept
# closed:    gone from this process (refused before it started, or done)
NEXT: dict[Phase, frozenset[Phase]] = {
    "claimed": frozenset({"executing", "closed"}),
    "executing": frozenset({"stopping", "closing"}),
    "stopping": frozenset({"closing"}),
    "closing": frozenset({"closed"}),
    "closed": frozenset(),
}


@dataclass(eq=False)
class _Live:
    """A run executing (or about to) in this process, and where it is in its life."""

    run_id: str
    session_id: str
    user_id: str | None
    message: str | None  # a resumed run's answer, stored in the session once it has started
    new: bool  # a new run: its row, owner, session and message are stored before it starts
    log: rl.EventLog  # its events, kept for readers while the runner stores them
    phase: Phase = "claimed"
    ready: asyncio.Future[None] = field(default_factory=asyncio.Future)  # its first event is out
    task: asyncio.Task[None] | None = None
    started: asyncio.Task[None] | None = None  # storing a resumed run's answer
    ended: bool = False  # it emitted its end or its pause
    last_seq: int = 0
    stored_here: bool = False  # its row was stored by this start (not a worker's stored run)

    def enter(self, phase: Phase) -> None:
        if phase not in NEXT[self.phase]:
            raise RuntimeError(f"run {self.run_id}: no way from {self.phase} to {phase}")
        self.phase = phase


def busy(latest: RunRow) -> RunConflict:
    """Why a new run of a session is refused, given the session's latest run."""
    if latest.status in PAUSED:
        return RunConflict(f"run {latest.id} of this session is paused: resume or cancel it")
    return RunConflict("this session already has a running run")


class RunManager:
    """Starts, resumes, cancels and streams the runs of the served teams."""

    accepted: RunStatus = "running"  # the status of a run just started

    def __init__(self, state: AppState) -> None:
        self.state = state
        self._runners: dict[str, tuple[Team, Runner]] = {}
        self._live: dict[str, _Live] = {}
        self._recovering: dict[str, asyncio.Task[None]] = {}  # runs an outage stopped
        # admission control: every run is accepted and announced at once, a few execute at a time
        self._slots = asyncio.Semaphore(state.settings.max_concurrent_runs)
        self._writer = rl.EventWriter(state.backend.runs)  # every live run's events, batched

    def runner(self, team_name: str) -> Runner:
        """The cached runner of a served team (rebuilt when the team is replaced)."""
        team = self.state.teams.get(team_name)
        if team is None:
            raise RunConflict(f"team {team_name!r} is not served any more")
        if self._runners.get(team_name, (None,))[0] is not team:
            hooks = (self, self.state.metrics)  # every event: the live run's state, the metrics
            runner = Runner(
                team.spec,
                self.state.backend,
                team.config,
                slots=self._slots,
                hooks=hooks,
                writer=self._writer,
            )
            self._runners[team_name] = (team, runner)
        return self._runners[team_name][1]

    async def start(
        self,
        user_id: str,
        session: SessionRow,
        team_name: str,
        request: str,
        template: str | None = None,
        also: Sequence[Statement] = (),
    ) -> str:
        """Start a run on the session's thread; returns once it is stored (its row, owner and
        session, the user's message and ``also``: one transaction) and its first event is
        emitted. A request no run can start on is refused before anything is stored."""
        check_request(request)
        runner = self.runner(team_name)
        log = rl.EventLog(self._writer)
        live = _Live(uuid.uuid4().hex, session.id, user_id, None, True, log)
        row = runner.run_row(
            request, live.run_id, session.id, template, user_id, session_id=session.id
        )

        async def accept() -> None:  # one short transaction: the check, the run, the message
            message = repo.message(session.id, "user", request, live.run_id)
            latest = await self.state.backend.runs.create(row, message, *also, unless=PAUSED)
            if latest is not None:
                raise busy(latest)

        stream = runner.stream(
            request,
            thread_id=session.id,
            run_id=live.run_id,
            template=template,
            user_id=user_id,
            accepted=True,
            log=live.log,
        )
        await self._begin(live, stream, accept)
        return live.run_id

    async def start_stored(self, row: RunRow) -> None:
        """Start a run an API process stored and queued (a worker claimed it and read it still
        ``pending``): as :meth:`start`, with the row, owner, session and message already in the
        database. A queued run is its session's latest until it ends (no run is stored beside a
        queued, executing or paused one): nothing supersedes it."""
        log = rl.EventLog(self._writer)
        live = _Live(row.id, row.session_id or row.thread_id, row.user_id, None, True, log)
        stream = self.runner(row.team_name).stream(
            row.input,
            thread_id=row.thread_id,
            run_id=row.id,
            template=row.template,
            user_id=row.user_id,
            accepted=True,
            log=live.log,
        )
        await self._begin(live, stream, latest=True)

    async def finished(self, run_id: str) -> None:
        """Wait until the run executing here has ended (or paused) and its last writes are done
        — through any resume after a database outage."""
        while True:
            recovering = self._recovering.get(run_id)
            live = self._live.get(run_id)
            if recovering is not None:
                await asyncio.shield(recovering)
            elif live is not None and live.task is not None:
                await asyncio.shield(live.task)
            else:
                return

    async def resume(self, run_id: str, answer: str | None = None, **reply: Any) -> RunRow:
        """Continue a paused, cancelled or crashed run (``answer``, ``decisions``, ``default``);
        returns its row as it was before (its events from now on come after its ``last_seq``)."""
        row = await self.state.backend.runs.get(run_id)
        log = rl.EventLog(self._writer, row.last_seq)
        live = _Live(run_id, row.session_id or row.thread_id, row.user_id, answer, False, log)
        runner = self.runner(row.team_name)
        stream = runner.resume_stream(run_id, answer=answer, log=live.log, **reply)
        await self._begin(live, stream)
        return row

    async def cancel(self, run_id: str) -> str:
        """Stop a running run (it ends ``cancelled``, resumable) or close a paused one."""
        live = self._live.get(run_id)
        if live is not None:
            if live.phase == "claimed" or live.task is None:
                raise RunConflict("the run is starting; try again")
            self._stop(live)
            await asyncio.shield(live.task)
        else:
            row = await self.state.backend.runs.get(run_id)
            if row.status not in PAUSED:
                raise RunConflict(f"the run is not running (status {row.status!r})")
            await self.state.backend.runs.cancel_stored(run_id, "cancelled while paused")
            await compact(
                self.state.backend, self.state.settings, run_id, row.thread_id, "cancelled"
            )
        return (await self.state.backend.runs.get(run_id)).status

    async def let_go(self, run_id: str) -> None:
        """Stop executing the run here, whatever it is doing — executing, closing, or waiting
        to be resumed after an outage — and never resume it here (another process has taken it
        over: the caller has told the run store to write nothing more of it)."""
        recovering = self._recovering.pop(run_id, None)
        if recovering is not None:
            recovering.cancel()
            await asyncio.gather(recovering, return_exceptions=True)
        live = self._live.get(run_id)
        if live is not None and live.task is not None:
            self._stop(live)
            await asyncio.gather(asyncio.shield(live.task), return_exceptions=True)

    def owner(self, run_id: str) -> str | None:
        """The user of a run executing in this process (``None``: not live here)."""
        live = self._live.get(run_id)
        return live.user_id if live is not None else None

    def live_in(self, session_id: str) -> str | None:
        """The run of the session executing in this process, if any."""
        return next((r.run_id for r in self._live.values() if r.session_id == session_id), None)

    def events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """Stored events with ``seq > after_seq``, then live ones until this execution ends."""
        return rl.one_by_one(self.batches(run_id, after_seq))

    async def batches(self, run_id: str, after_seq: int = 0) -> AsyncGenerator[list[Event], None]:
        """:meth:`events` in batches of what was ready together (``event_log.replay``); a run
        that a database outage stopped goes on in the same stream once it is resumed."""
        while True:
            live = self._live.get(run_id)
            log = live.log if live else None
            async for batch in rl.replay(self.state.backend.runs, run_id, after_seq, log):
                after_seq = batch[-1].seq
                yield batch
            recovering = self._recovering.get(run_id)
            if recovering is None:
                return
            await asyncio.shield(recovering)

    async def shutdown(self) -> None:
        """Cancel every running run (they stay resumable) and wait for their last writes."""
        for recovery in self._recovering.values():
            recovery.cancel()
        running = list(self._live.values())
        for live in running:
            self._stop(live)
        await asyncio.gather(*(r.task for r in running if r.task), return_exceptions=True)
        await self._writer.stop()

    async def _begin(
        self,
        live: _Live,
        events: AsyncIterator[Event],
        accept: Callable[[], Awaitable[None]] | None = None,
        latest: bool = False,
    ) -> None:
        """Claim the session, store the run checking the session's latest run (``accept``) or
        check that run (a stored run; ``latest``: known to be its session's latest), run it in
        the background; return once its first event is out (or raise why it could not start)."""
        if any(other.session_id == live.session_id for other in self._live.values()):
            raise RunConflict("this session already has a running run")
        self._live[live.run_id] = live
        live.stored_here = accept is not None
        try:
            if accept is not None:
                await accept()
            elif not latest:
                await self._check_latest(live)
        except BaseException:
            live.enter("closed")
            self._live.pop(live.run_id)
            raise
        live.enter("executing")
        with bind_run(live.run_id):  # the task keeps the run id in its context
            live.task = asyncio.create_task(self._run(live, events))
        await asyncio.shield(live.ready)

    async def _check_latest(self, live: _Live) -> None:
        """A stored run starts or resumes unless a later run of its session superseded it (or,
        for a new one, the session's latest run is paused)."""
        latest = await self.state.backend.runs.latest_in_session(live.session_id)
        if latest is None:
            return
        if live.new and latest.status in PAUSED:
            raise busy(latest)
        if not live.new and latest.id != live.run_id:
            raise RunConflict(f"a later run of this session ({latest.id}) superseded this one")

    def _stop(self, live: _Live) -> None:
        """Cancel an executing run (once; a run already closing keeps its course)."""
        if live.phase == "executing" and live.task is not None:
            live.enter("stopping")
            live.task.cancel()

    async def _run(self, live: _Live, events: AsyncIterator[Event]) -> None:
        error: BaseException | None = None
        try:
            async for _ in events:
                pass  # every event reaches _on_event as it is emitted
        except (Exception, asyncio.CancelledError) as exc:  # the graph's errors are events
            error = exc
        await self._close(live, error)

    async def _close(self, live: _Live, error: BaseException | None) -> None:
        stopped = live.phase == "stopping"
        live.enter("closing")
        try:
            await live.log.close()
            if live.started is not None:
                await asyncio.gather(live.started, return_exceptions=True)
            if stopped and not live.ended:  # stopped before the graph noticed
                row = await self.state.backend.runs.get(live.run_id)
                if row.status in OPEN:
                    await self.state.backend.runs.cancel_stored(row.id, "cancelled", live.last_seq)
            elif live.new and not live.ready.done():  # stored, then refused before its first event
                await self._not_started(live, error)
        except Exception:
            log.exception("could not close run %s cleanly", live.run_id)
        finally:
            if live.ready.done() and not stopped and error is not None and is_outage(error):
                self._recover(live.run_id)
            live.enter("closed")
            self._live.pop(live.run_id, None)
            live.log.end()
            if not live.ready.done():  # it failed to start: the caller gets the error
                failure = RunConflict("the run stopped before it started")
                live.ready.set_exception(error if isinstance(error, Exception) else failure)
            elif isinstance(error, Exception) and not is_outage(error):  # an outage: resumed
                log.error("run %s failed outside the graph: %r", live.run_id, error)

    def _recover(self, run_id: str) -> None:
        """Resume a run a database outage stopped, once the database answers (tried again
        through further outages; a run that ended or moved on meanwhile is left alone)."""
        log.warning("run %s stopped: the database is unreachable; resumed once it is back", run_id)

        async def resume() -> None:
            store = self.state.backend.runs
            try:
                row = await until_reachable(lambda: store.get(run_id), what=f"run {run_id}")
                if row.status == "running":
                    await until_reachable(lambda: self.resume(run_id), what=f"resuming {run_id}")
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run %s could not be resumed after the outage", run_id)
            finally:
                self._recovering.pop(run_id, None)

        with bind_run(run_id):
            self._recovering[run_id] = asyncio.get_running_loop().create_task(resume())

    def _later(self, run_id: str, write: Callable[[], Awaitable[None]]) -> None:
        """``write`` once the database answers again (a run's closing write an outage held)."""

        async def written() -> None:
            try:
                await until_reachable(write, what=f"closing run {run_id}")
            finally:
                self._recovering.pop(run_id, None)

        self._recovering[run_id] = asyncio.get_running_loop().create_task(written())

    async def _not_started(self, live: _Live, error: BaseException | None) -> None:
        """A new run that failed before its first event: it ends ``failed`` with why — once the
        database answers if an outage stopped it and its start got a 503; a worker's stored run
        an outage stopped is left to the worker, which starts it again."""
        if error is None or not is_outage(error):
            await self._refused(live, error)
        elif live.stored_here:
            self._later(live.run_id, lambda: self._refused(live, error))

    async def _refused(self, live: _Live, error: BaseException | None) -> None:
        """A new run whose row is stored but which never started ends ``failed``, with why."""
        row = await self.state.backend.runs.get(live.run_id)
        if row.status in OPEN:
            reason = str(error) if error is not None else "the run stopped before it started"
            await self.state.backend.runs.update(
                row.id, status="failed", error=reason, finished_at=utcnow()
            )

    def on_event(self, event: BaseEvent) -> None:
        """A run hook: every event of a live run (the runner adds it to the run's log)."""
        live = self._live.get(event.run_id)
        if live is None:
            return
        live.last_seq = event.seq
        live.ended = live.ended or rl.kind(event) in rl.STOPS
        if isinstance(event, RunCompleted) and event.output:  # the session's answer
            live.log.keep(repo.message(live.session_id, "assistant", event.output, live.run_id))
        if live.started is None and not live.ready.done():  # its first event
            if live.message:  # a resumed run: store the answer first
                live.started = asyncio.get_running_loop().create_task(self._started(live))
            else:
                live.ready.set_result(None)

    async def _started(self, live: _Live) -> None:
        try:
            if live.message:
                await self._message(live, "user", live.message)
        except Exception as exc:
            live.ready.set_exception(exc)
            self._stop(live)
        else:
            live.ready.set_result(None)

    async def _message(self, live: _Live, role: str, content: str) -> None:
        direct = self.state.backend.direct
        await repo.add_message(direct, live.session_id, role, content, live.run_id)
