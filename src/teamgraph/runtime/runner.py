"""The runner: one way to run a team, shared by the Python API, the CLI and the server.

It compiles the team's graph once, runs it on a thread with the checkpointer, turns everything the
graph does into :mod:`teamgraph.events`, accounts usage and cost, and resumes interrupted runs. It
knows patterns only through their :class:`~teamgraph.patterns.contract.Pattern`: the input of a
new run, and the :class:`~teamgraph.patterns.contract.Outcome` its state folds into.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing, nullcontext, suppress
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt

from teamgraph.durable import FirstExecution, Journal
from teamgraph.errors import BudgetExceeded, DatabaseUnavailable, RunConflict, UsageError
from teamgraph.events import (
    STEP_OUTCOME_EVENTS,
    STEP_OUTCOMES,
    BaseEvent,
    Event,
    Resumed,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStatus,
    TokenUsage,
)
from teamgraph.knowledge import SHARED
from teamgraph.llm.cassette import Cassette, RecordedModel
from teamgraph.llm.pricing import PriceTable
from teamgraph.llm.provider import ModelProvider
from teamgraph.llm.usage import UsageTracker
from teamgraph.patterns import pattern_of
from teamgraph.patterns.contract import Outcome, RunInput, build_result
from teamgraph.plan import Plan
from teamgraph.planning.plan_cache import PlanCache
from teamgraph.planning.templates import Template, available
from teamgraph.result import RunResult
from teamgraph.run_context import Emitter, RunContext
from teamgraph.runtime.backend import Backend
from teamgraph.runtime.event_log import EventLog, EventWriter
from teamgraph.runtime.reranker import reranker
from teamgraph.runtime.resuming import DecisionLike, emit_pauses, pending_requests, resume_command
from teamgraph.runtime.retention import compact
from teamgraph.runtime.run_config import RunConfig, RunHooks
from teamgraph.specs.team import TeamSpec
from teamgraph.status import FINISHED
from teamgraph.storage.models import utcnow
from teamgraph.storage.outages import is_outage, stopped
from teamgraph.storage.run_store import ROW_RESERVE, SeqBlock
from teamgraph.tools.mcp_client import load_mcp_tools
from teamgraph.tools.registry import ToolResources


@dataclass
class _Execution:
    """One execution of a run, prepared and announced: what :meth:`Runner._drive` runs and
    streams, and, once its stream has ended, the ``outcome`` the run finished with (``None``
    when it paused, failed or was cancelled)."""

    graph_input: Any  # a new run's input, or what resumes the thread
    ctx: RunContext
    queue: asyncio.Queue[BaseEvent | None]  # the run's events, then ``None`` once it stops
    log: EventLog
    begin: Callable[[], Awaitable[None]]  # inside the run, before the graph executes
    outcome: Outcome | None = None


def check_request(request: str) -> None:
    """Refuse a request no run can start on (:class:`UsageError`), before anything is stored."""
    if not request.strip():
        raise UsageError("the request is empty: say what the team should do")


class Runner:
    """Runs one team against a :class:`Backend`. ``slots`` (shared by a server's runners) bounds
    how many runs execute at once; ``hooks`` see every event of every run. Every run's events
    are stored (``writer``, shared by a server's runners, batches them across runs) and its
    stream ends once they all are."""

    def __init__(
        self,
        team: TeamSpec,
        backend: Backend,
        config: RunConfig | None = None,
        *,
        slots: asyncio.Semaphore | None = None,
        hooks: Sequence[RunHooks] = (),
        writer: EventWriter | None = None,
    ) -> None:
        self.team = team
        self.backend = backend
        self.config = config = config or RunConfig()
        self.slots = slots
        self.hooks = tuple(hooks)
        self.writer = writer or EventWriter(backend.runs)
        self.models = ModelProvider(
            config.settings, config.models, config.model, rates=backend.rates
        )
        self.prices = PriceTable.load(config.settings.prices_file)
        self.templates: dict[str, Template] = available(
            config.settings.templates_dirs, team.workflow.templates_dirs
        )
        self.pattern = pattern_of(team)
        self.graph = self.pattern.build(team, backend.checkpointer)
        self._mcp_loaded = False  # the team's MCP tools are in the registry

    # --- starting and resuming -----------------------------------------------------------------
    async def stream(
        self,
        request: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        template: str | None = None,
        plan: Plan | None = None,
        user_id: str | None = None,
        accepted: bool = False,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        log: EventLog | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Start a run and yield its events as they happen. ``user_id`` (default: the config's)
        owns the run and namespaces its shared notes. ``accepted``: the caller has stored the
        run's row already (:meth:`run_row`, with the same ids), e.g. in a transaction of its own.
        ``record``: write every model request and reply and every tool result to this file;
        ``replay``: answer them from such a file instead (no model is called, no tool runs).
        ``log``: where the run's events are kept for other readers while they are stored (the
        server's); by default a log of its own."""
        cassette = _cassette(record, replay)
        execution = await self._start(
            request, thread_id, run_id, template, plan, user_id, accepted, cassette, log
        )
        async with aclosing(self._drive(execution)) as events:
            async for event in events:  # closing this stream stops the run, at once
                yield event

    async def _start(
        self,
        request: str,
        thread_id: str | None,
        run_id: str | None,
        template: str | None,
        plan: Plan | None,
        user_id: str | None,
        accepted: bool,
        cassette: Cassette | None = None,
        log: EventLog | None = None,
    ) -> _Execution:
        """A new run, stored (unless ``accepted``) and announced, ready to :meth:`_drive`."""
        check_request(request)
        run_id = run_id or uuid.uuid4().hex
        thread_id = thread_id or run_id
        if not accepted:  # nothing stored yet: a failing preparation is the caller's error
            await self._prepare()
            row = self.run_row(request, run_id, thread_id, template, user_id, plan=plan)
            await self.backend.runs.create(row)
        queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue()
        seqs = self.backend.runs.seqs(run_id, 0, ROW_RESERVE)
        log = log or EventLog(self.writer)
        emitter = self._emitter(run_id, queue, seqs, log)
        ctx = self._context(run_id, thread_id, emitter, user_id, cassette, first=True)
        ctx.emit(
            RunStarted,
            team=self.team.name,
            pattern=self.team.pattern,
            input=request,
            thread_id=thread_id,
        )
        graph_input = self.pattern.start(
            self.team, RunInput(request, template, plan, self.templates)
        )

        async def begin() -> None:  # inside the run: a failure here is its run_failed event
            if accepted:
                await self._prepare()
            if plan is not None and accepted:  # the caller's row may not hold it: keep it
                await ctx.journal.keep_input_plan(run_id, plan.to_dict())
            await self.pattern.announce_input(ctx, graph_input, True)

        return _Execution(graph_input, ctx, queue, log, begin)

    @cached_property
    def _team_json(self) -> dict[str, Any]:
        """The team's spec as every run's row keeps it (dumped once: ≈ 30 µs a run)."""
        return self.team.model_dump(mode="json")

    def run_row(
        self,
        request: str,
        run_id: str,
        thread_id: str,
        template: str | None = None,
        user_id: str | None = None,
        plan: Plan | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The ``runs`` row of a new run, with the first block of event seqs reserved and its
        explicit ``plan`` (a start again before the first checkpoint runs that plan)."""
        status: RunStatus = "running"
        return {
            "id": run_id,
            "thread_id": thread_id,
            "team_name": self.team.name,
            "team_spec": self._team_json,
            "pattern": self.team.pattern,
            "input": request,
            "template": template,
            "input_plan": None if plan is None else plan.to_dict(),
            "status": status,
            "user_id": user_id,
            "last_seq": ROW_RESERVE,  # seqs reserved with the row: most runs need no other write
            **extra,
        }

    async def resume_stream(
        self,
        run_id: str,
        *,
        answer: str | None = None,
        decisions: Mapping[str, DecisionLike] | None = None,
        default: DecisionLike | None = None,
        log: EventLog | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Continue a paused or interrupted run. A paused run needs the ``answer`` to its
        question or ``decisions`` (by request id; ``default`` for all) on its tool calls.
        Finished steps, model replies and tool results are replayed, never redone. ``log``:
        as :meth:`stream`'s (its floor: the run's last stored seq)."""
        execution = await self._resume(run_id, answer, decisions, default, log)
        async with aclosing(self._drive(execution)) as events:
            async for event in events:
                yield event

    async def _resume(
        self,
        run_id: str,
        answer: str | None,
        decisions: Mapping[str, DecisionLike] | None,
        default: DecisionLike | None,
        log: EventLog | None = None,
    ) -> _Execution:
        """A paused or interrupted run, replied to and announced again, ready to :meth:`_drive`."""
        row = await self.backend.runs.get(run_id)
        if row.status in FINISHED:
            raise RunConflict(
                f"run {run_id} already ended with status {row.status!r}: nothing to resume "
                f"(`teamgraph show {run_id[:12]}` prints its answer)"
            )
        snapshot = await self.graph.aget_state(self.thread_config(row.thread_id))
        command: Any = None  # continue from the last checkpoint
        if snapshot.interrupts:
            command = await self._reply(run_id, snapshot.interrupts, answer, decisions, default)
        elif snapshot.metadata is None:  # stopped before its first checkpoint: start again
            given = row.input_plan or await Journal(self.backend.journal).input_plan(run_id)
            plan = None if given is None else Plan.from_dict(given)
            command = self.pattern.start(
                self.team, RunInput(row.input, row.template, plan, self.templates)
            )
        await self._prepare()
        queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue()
        seqs = self.backend.runs.seqs(run_id, row.last_seq, row.last_seq + ROW_RESERVE)
        log = log or EventLog(self.writer, row.last_seq)
        emitter = self._emitter(run_id, queue, seqs, log)
        ctx = self._context(run_id, row.thread_id, emitter, row.user_id)
        ctx.reported = await self._reported(run_id)
        await self.backend.runs.update(run_id, status="running", last_seq=seqs.reserved)
        await self._announce_resume(ctx, snapshot.values)

        async def begin() -> None:  # a plan in the new input: announced unless it was
            await self.pattern.announce_input(ctx, command, False)

        return _Execution(command, ctx, queue, log, begin)

    async def keep_reply(
        self,
        run_id: str,
        *,
        answer: str | None = None,
        decisions: Mapping[str, DecisionLike] | None = None,
        default: DecisionLike | None = None,
    ) -> None:
        """Check the reply to a paused run and keep it in the journal, for whichever process
        resumes the run (its :meth:`resume_stream` without a reply finds it there). A run that
        is not paused needs no reply: nothing is kept. Raises what :meth:`resume_stream` would
        for a wrong reply."""
        row = await self.backend.runs.get(run_id)
        if row.status in FINISHED:
            raise RunConflict(f"run {run_id} already ended with status {row.status!r}")
        snapshot = await self.graph.aget_state(self.thread_config(row.thread_id))
        if snapshot.interrupts:
            await self._reply(run_id, snapshot.interrupts, answer, decisions, default)

    async def keep_decision(self, run_id: str, request_id: str, decision: Any) -> None:
        """Keep one tool call's decision in the run's journal until every call of the pause has
        one (clients that decide call by call); :meth:`kept_decisions` reads them back."""
        await Journal(self.backend.journal).record_decision(run_id, request_id, decision)

    async def kept_decisions(self, run_id: str, request_ids: list[str]) -> dict[str, Any]:
        """The decisions kept so far (:meth:`keep_decision`) for these tool calls of the run."""
        return await Journal(self.backend.journal).decisions(run_id, request_ids)

    async def _reply(
        self,
        run_id: str,
        interrupts: Sequence[Interrupt],
        answer: str | None,
        decisions: Mapping[str, DecisionLike] | None,
        default: DecisionLike | None,
    ) -> Command[Any]:
        """What resumes the paused run: the reply given now (kept in the journal first), or,
        when none is given, the one an earlier resume brought before a crash stopped it."""
        journal = Journal(self.backend.journal)
        if answer is None and decisions is None and default is None:
            given = await journal.replies(run_id, [item.id for item in interrupts])
            if given is not None:
                return Command(resume=given)
        command = resume_command(interrupts, answer, decisions, default)
        await journal.record_replies(run_id, cast(dict[str, Any], command.resume))
        return command

    async def _reported(self, run_id: str) -> set[tuple[str, ...]]:
        """The step outcomes already in the run's stored events (``RunContext.reported``)."""
        stored = await self.backend.runs.events_of([run_id], STEP_OUTCOMES)
        outcomes = [e for e in stored if isinstance(e, STEP_OUTCOME_EVENTS)]
        return {(*e.path, e.parent_id or "", e.step_id) for e in outcomes}

    async def _announce_resume(self, ctx: RunContext, values: Mapping[str, Any]) -> None:
        """Count what earlier executions spent (every recorded model reply, once), then announce
        ``resumed`` with what is done already and the plan (for a consumer that starts following
        the run here; the plan is not announced again)."""
        for entry in await ctx.journal.model_entries(ctx.run_id):
            ctx.usage.add(entry.agent, entry.steps, entry.usage)
            ctx.usage.model_calls += 1
        done = await self.ledger.load(ctx.run_id)
        completed = sorted(k for k, r in done.items() if r.status == "done")
        info = self.pattern.outcome(values).plan
        if info is None:
            ctx.emit(Resumed, completed_steps=completed)
            return
        ctx.emit(
            Resumed,
            completed_steps=completed,
            plan_name=info.plan.name,
            tier=info.tier,
            confidence=info.plan.confidence,
            steps=info.plan.to_dict()["steps"],
        )

    async def pending(self, run_id: str) -> list[dict[str, Any]]:
        """What a paused run waits for: clarifying questions and tool calls to approve."""
        row = await self.backend.runs.get(run_id)
        snapshot = await self.graph.aget_state(self.thread_config(row.thread_id))
        return pending_requests(snapshot.interrupts)

    async def run(self, request: str, **options: Any) -> RunResult:
        """Run to the end and return the result (options: as :meth:`stream`)."""
        run_id = options.pop("run_id", None) or uuid.uuid4().hex
        execution = await self._start(
            request,
            options.pop("thread_id", None),
            run_id,
            options.pop("template", None),
            options.pop("plan", None),
            options.pop("user_id", None),
            options.pop("accepted", False),
            _cassette(options.pop("record", None), options.pop("replay", None)),
        )
        return await self._complete(execution)

    async def resume(self, run_id: str, **reply: Any) -> RunResult:
        """Continue a run to its end (``reply``: as :meth:`resume_stream`)."""
        execution = await self._resume(
            run_id, reply.get("answer"), reply.get("decisions"), reply.get("default")
        )
        return await self._complete(execution)

    async def _complete(self, execution: _Execution) -> RunResult:
        """Drive the run to the end of its events; its result (the stored one when the run did
        not finish: it paused, failed or was cancelled)."""
        async with aclosing(self._drive(execution)) as events:
            async for _ in events:
                pass
        ctx = execution.ctx
        if execution.outcome is None:
            return await self.result(ctx.run_id)
        return build_result(
            ctx.run_id,
            ctx.thread_id,
            execution.outcome,
            usage=ctx.usage.total,
            usage_by_agent=dict(ctx.usage.by_agent),
        )

    # --- reading -------------------------------------------------------------------------------
    @property
    def ledger(self) -> Any:
        return self.backend.ledger

    async def result(self, run_id: str) -> RunResult:
        """The stored result of a run (finished or not): its row, its thread's state and the
        step records stored so far."""
        row = await self.backend.runs.get(run_id)
        outcome = self._outcome(await self.thread_state(row.thread_id))
        outcome.steps = {**outcome.steps, **await self.ledger.load(run_id)}
        usage = TokenUsage(
            input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd=row.cost_usd
        )
        by_agent = {k: TokenUsage.model_validate(v) for k, v in row.usage_by_agent.items()}
        return build_result(
            run_id,
            row.thread_id,
            outcome,
            status=row.status,  # type: ignore[arg-type]
            output=row.output or "",
            error=row.error or "",
            usage=usage,
            usage_by_agent=by_agent,
        )

    def _outcome(self, values: Mapping[str, Any]) -> Outcome:
        outcome = self.pattern.outcome(values)
        if self.team.initial_state is None:  # no shared state: what tools kept is scratch
            outcome.shared_state = None
        return outcome

    async def thread_state(self, thread_id: str) -> dict[str, Any]:
        """The graph state of a thread as its last checkpoint holds it."""
        return dict((await self.graph.aget_state(self.thread_config(thread_id))).values)

    # --- executing -----------------------------------------------------------------------------
    async def _prepare(self) -> None:
        """Index the team's knowledge (incrementally) and load its MCP tools (once)."""
        knowledge = sorted(set(_knowledge(self.team)))
        if knowledge:
            await asyncio.to_thread(
                self.backend.knowledge.ingest, knowledge, team_collection(self.team.name)
            )
        if self.team.mcp_servers and not self._mcp_loaded:
            for ref, tool in (await load_mcp_tools(self.team.mcp_servers)).items():
                self.config.registry.add(tool, ref)
            self._mcp_loaded = True

    def _context(
        self,
        run_id: str,
        thread_id: str,
        emitter: Emitter,
        user_id: str | None = None,
        cassette: Cassette | None = None,
        *,
        first: bool = False,
    ) -> RunContext:
        """What one execution of the run works with; ``first``: the run is new (its journal
        and ledger hold only what this execution writes: :class:`FirstExecution`)."""
        user = user_id or self.config.user_id
        models = self.models
        if cassette is not None and cassette.replaying:  # every named model: the recording
            config = self.config
            models = ModelProvider(
                config.settings, config.models, config.model, RecordedModel(), self.backend.rates
            )
        journal, ledger = self.backend.journal, self.ledger
        if first:
            records = FirstExecution(journal, ledger)
            journal, ledger = records.journal, records.ledger
        ctx = RunContext(
            run_id=run_id,
            thread_id=thread_id,
            team=self.team,
            emitter=emitter,
            models=models,
            tools=self.config.registry,
            tool_resources=self._tool_resources(user),
            store=self.backend.store,
            plan_cache=self._plan_cache() if cassette is None else None,  # replays as recorded
            user_id=user,
            ledger=ledger,
            journal=Journal(journal),
            usage=UsageTracker(self.prices, self.team.budget),
            templates=self.templates,
            cassette=cassette,
            checkpointer=self.backend.checkpointer,
        )
        ctx.tool_resources.rerank = reranker(ctx)
        return ctx

    def _tool_resources(self, user: str) -> ToolResources:
        """What the team's tools reach for ``user``: the knowledge collections the team may
        search, the shared store and the user's notes."""
        collections = (
            team_collection(self.team.name),
            user_collection(user),
            SHARED,
            *map(named_collection, _collections(self.team)),
        )
        return ToolResources(
            knowledge=self.backend.knowledge.scoped(collections, self.team.embedding_model),
            store=self.backend.store,
            notes_namespace=("teamgraph", "notes", self.team.name, user),
        )

    def _plan_cache(self) -> PlanCache | None:
        """The plan cache of this runner's runs (none where the backend keeps no entries)."""
        plans = self.backend.plans
        return PlanCache(plans, self.config.settings) if plans is not None else None

    def _emitter(
        self, run_id: str, queue: asyncio.Queue[BaseEvent | None], seqs: SeqBlock, log: EventLog
    ) -> Emitter:
        """Events go to the run's log (stored: an event that cannot be stored fails here,
        before anyone hears of it), its stream and every hook."""
        sinks = [log.add, queue.put_nowait, *(hook.on_event for hook in self.hooks)]

        def sink(event: BaseEvent) -> None:
            for deliver in sinks:
                deliver(event)

        return Emitter(run_id, sink, seqs, end=partial(log.end_with, run_id))

    def thread_config(self, thread_id: str) -> RunnableConfig:
        """LangGraph's config for a thread of this team (its checkpoints, its limits)."""
        return self.pattern.thread_config(self.team, thread_id)

    async def _drive(self, execution: _Execution) -> AsyncGenerator[Event, None]:
        """Execute the run and yield its events as they happen; once they end (the run finished,
        paused, failed or was stopped by closing this stream), ``execution.outcome`` is set."""
        ctx = execution.ctx
        task = asyncio.create_task(self._invoke(execution))
        try:
            while (event := await execution.queue.get()) is not None:
                yield event  # type: ignore[misc]
        finally:
            try:
                if not task.done():
                    task.cancel()
                    with suppress(asyncio.CancelledError):
                        await task
                    if not ctx.closed:  # cancelled before it began: record that it stopped
                        ctx.emit(RunCancelled, reason="cancelled")
                        await self._save(ctx, status="cancelled", error="cancelled")
                else:
                    execution.outcome = task.result()
            finally:
                await execution.log.close()  # the stream ends once every event is stored

    async def _invoke(self, execution: _Execution) -> Outcome | None:
        """Run the graph to its end or its next pause; the outcome when the run finished."""
        ctx = execution.ctx
        try:
            await execution.begin()
            async with self.slots or nullcontext():  # started and announced; now execute
                final = await self.graph.ainvoke(
                    execution.graph_input,
                    self.thread_config(ctx.thread_id),
                    context=ctx,
                    durability="sync",
                )
            if ctx.cassette is not None and ctx.cassette.mismatch is not None:
                raise ctx.cassette.mismatch  # a replay that left its recording fails the run
            if final.get("__interrupt__"):
                await self._pause(ctx, final["__interrupt__"])
                return None
            outcome = self._outcome(final)
            await self._finish(ctx, outcome)
            return outcome
        except BudgetExceeded as exc:
            outcome = self._outcome(await self.thread_state(ctx.thread_id))
            outcome.status, outcome.error = "budget_exceeded", str(exc)
            await self._finish(ctx, outcome)
            return outcome
        except asyncio.CancelledError:
            ctx.emit(RunCancelled, reason="cancelled")
            await self._save(ctx, status="cancelled", error="cancelled")
            raise
        except DatabaseUnavailable:
            raise  # nothing can be written: the run stays as it is, resumable
        except Exception as exc:
            if is_outage(exc):  # met outside teamgraph's own stores (the checkpointer)
                raise stopped(exc) from exc
            ctx.emit(RunFailed, error=f"{type(exc).__name__}: {exc}")
            await self._save(ctx, status="failed", error=f"{type(exc).__name__}: {exc}")
            return None
        finally:
            execution.queue.put_nowait(None)

    async def _pause(self, ctx: RunContext, interrupts: list[Any]) -> None:
        emit_pauses(ctx, pending_requests(interrupts))
        await self._save(ctx, status="interrupted", finished_at=None)

    async def _finish(self, ctx: RunContext, outcome: Outcome) -> None:
        """Announce and store how the run finished."""
        ctx.emit(
            RunCompleted,
            status=outcome.status,
            output=outcome.output,
            usage=ctx.usage.total,
            shared_state=outcome.shared_state,
        )
        tier = outcome.plan.tier if outcome.plan else None
        await self._save(
            ctx,
            status=outcome.status,
            output=outcome.output,
            planner_tier=tier,
            error=outcome.error or None,
        )

    async def _save(self, ctx: RunContext, **fields: Any) -> None:
        """Write how this execution ended to the run's row — with its last events, in one
        transaction: a reader in another process that sees either sees both. The write waits
        out a database outage as every event does (up to ``OUTAGE_S``): a run that ended is not
        resumed, and does not end twice, for want of its status."""
        ctx.closed = True
        seqs = ctx.emitter.seqs
        if isinstance(seqs, SeqBlock):
            await seqs.settle()  # never let a late reservation overwrite this
        total = ctx.usage.total
        row = {
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "cost_usd": total.cost_usd,
            "last_seq": ctx.emitter.seq,
            "usage_by_agent": {k: v.model_dump() for k, v in ctx.usage.by_agent.items()},
            **{"finished_at": utcnow(), **fields},
        }
        await ctx.emitter.end(row)
        status = fields.get("status", "")  # compacted once the row says how the run ended
        await compact(self.backend, self.config.settings, ctx.run_id, ctx.thread_id, status)


def _cassette(record: str | Path | None, replay: str | Path | None) -> Cassette | None:
    if record is not None and replay is not None:
        raise UsageError("record or replay a run, not both at once")
    if replay is not None:
        return Cassette(replay, "replay")
    return Cassette(record, "record") if record is not None else None


def team_collection(team: str) -> str:
    """The knowledge collection of a team's YAML ``knowledge`` (its nested teams' included);
    a team the server derives from it (``research:single-researcher``) reads the same one."""
    return f"team:{team.partition(':')[0]}"


def named_collection(name: str) -> str:
    """A named collection (``teamgraph ingest --collection NAME``), read by the teams that list
    it under ``collections``."""
    return f"collection:{name}"


def user_collection(user_id: str) -> str:
    """The knowledge collection of what a user uploaded."""
    return f"user:{user_id}"


def _collections(team: TeamSpec) -> list[str]:
    """The named collections of a team and of its nested teams."""
    names = list(team.collections)
    for member in team.members:
        if isinstance(member, TeamSpec):
            names += [n for n in _collections(member) if n not in names]
    return names


def _knowledge(team: TeamSpec) -> list[str]:
    """The knowledge paths of a team and of its nested teams."""
    paths = list(team.knowledge)
    for member in team.members:
        if isinstance(member, TeamSpec):
            paths += _knowledge(member)
    return paths
