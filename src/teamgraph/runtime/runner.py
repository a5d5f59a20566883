"""The runner: one way to run a team, shared by the Python API, the CLI and the server.

It compiles the team's graph once, runs it on a thread with the checkpointer, turns everything the
graph does into :mod:`teamgraph.events`, accounts usage and cost, and resumes interrupted runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing, nullcontext, suppress
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from teamgraph import patterns
from teamgraph.config import Settings
from teamgraph.errors import BudgetExceeded, UsageError
from teamgraph.events import (
    BaseEvent,
    Event,
    Resumed,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    TokenUsage,
)
from teamgraph.ledger import StepLedger, StepRecord
from teamgraph.llm.pricing import PriceTable
from teamgraph.llm.provider import ModelProvider
from teamgraph.llm.usage import UsageTracker
from teamgraph.patterns import workflow
from teamgraph.plan import Plan
from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, Template, load_templates
from teamgraph.result import RunResult, StepResult
from teamgraph.run_context import Emitter, RunContext
from teamgraph.runtime.backend import Backend
from teamgraph.runtime.pauses import Decision, emit_pauses, pending_requests, resume_command
from teamgraph.specs.team import TeamSpec
from teamgraph.storage.models import utcnow
from teamgraph.tools.mcp import load_mcp_tools
from teamgraph.tools.registry import ToolRegistry, ToolResources, builtin_registry

TERMINAL = {"completed", "completed_with_errors"}  # failed or cancelled runs may resume
# event seqs reserved by the run row's own writes (start, resume): most runs need no other write
SEQS_WITH_ROW = 10 * Emitter.BLOCK
RESULT_FIELDS = ("status", "output", "error", "elapsed_s", "usage")


class Runner:
    """Runs one team against a :class:`Backend`."""

    def __init__(
        self,
        team: TeamSpec,
        backend: Backend,
        *,
        settings: Settings | None = None,
        models: Mapping[str, BaseChatModel] | None = None,
        model: BaseChatModel | None = None,
        registry: ToolRegistry | None = None,
        ledger: StepLedger | None = None,
        user_id: str = "default",
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        self.team = team
        self.backend = backend
        self.user_id = user_id
        self.slots = slots  # shared by a server's runners: how many runs execute at once
        self.settings = settings or Settings()
        self.models = ModelProvider(self.settings, models, model)
        self.registry = registry or builtin_registry()
        self.ledger = ledger or backend.ledger
        self.prices = PriceTable.load(self.settings.prices_file)
        self.templates: dict[str, Template] = load_templates(
            [BUILTIN_TEMPLATES_DIR, *self.settings.templates_dirs, *team.workflow.templates_dirs]
        )
        self.graph = patterns.build(team, backend.checkpointer)
        self._finished: dict[str, RunResult] = {}
        self._reservations: set[asyncio.Task[None]] = set()  # seq high-water marks being saved
        self._mcp_loaded = False  # results of runs that ended in this process

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
    ) -> AsyncGenerator[Event, None]:
        """Start a run and yield its events as they happen. ``user_id`` (default: the runner's)
        owns the run and namespaces its shared notes. ``accepted``: the caller has stored the
        run's row already (:meth:`run_row`, with the same ids), e.g. in a transaction of its own."""
        if not request.strip():
            raise UsageError("the request is empty: say what the team should do")
        run_id = run_id or uuid.uuid4().hex
        thread_id = thread_id or run_id
        if not accepted:  # nothing stored yet: a failing preparation is the caller's error
            await self._prepare()
            await self.backend.runs.create(
                **self.run_row(request, run_id, thread_id, template, user_id)
            )
        queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue()
        emitter = self._emitter(run_id, queue, reserved=SEQS_WITH_ROW)
        ctx = self._context(run_id, thread_id, emitter, user_id)
        ctx.emit(
            RunStarted,
            team=self.team.name,
            pattern=self.team.pattern,
            input=request,
            thread_id=thread_id,
        )
        graph_input = self._graph_input(request, template, plan)

        async def begin() -> None:  # inside the run: a failure here is its run_failed event
            if accepted:
                await self._prepare()
            if plan is not None and graph_input.get("planned"):  # the graph starts with execute
                workflow.emit_plan(ctx, plan, "explicit")

        async with aclosing(self._drive(graph_input, ctx, queue, begin)) as events:
            async for event in events:  # closing this stream stops the run, at once
                yield event

    def run_row(
        self,
        request: str,
        run_id: str,
        thread_id: str,
        template: str | None = None,
        user_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The ``runs`` row of a new run, with the first block of event seqs reserved."""
        return {
            "id": run_id,
            "thread_id": thread_id,
            "team_name": self.team.name,
            "team_spec": self.team.model_dump(mode="json"),
            "pattern": self.team.pattern,
            "input": request,
            "template": template,
            "status": "running",
            "user_id": user_id,
            "last_seq": SEQS_WITH_ROW,
            **extra,
        }

    async def _prepare(self) -> None:
        """Index the team's knowledge (incrementally) and load its MCP tools (once)."""
        knowledge = sorted(set(_knowledge(self.team)))
        if knowledge:
            await asyncio.to_thread(self.backend.knowledge.ingest, knowledge)
        if self.team.mcp_servers and not self._mcp_loaded:
            for ref, tool in (await load_mcp_tools(self.team.mcp_servers)).items():
                self.registry.add(tool, ref)
            self._mcp_loaded = True

    async def resume_stream(
        self,
        run_id: str,
        *,
        answer: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        default: Decision | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Continue a paused or interrupted run. A paused run needs the ``answer`` to its
        question or ``decisions`` (by request id; ``default`` for all) on its tool calls.
        Finished steps, model replies and tool results are replayed, never redone."""
        row = await self.backend.runs.get(run_id)
        if row.status in TERMINAL:
            raise UsageError(f"run {run_id} already ended with status {row.status!r}")
        snapshot = await self.graph.aget_state(self._config(row.thread_id))
        command: Any = None  # continue from the last checkpoint
        if snapshot.interrupts:
            command = resume_command(snapshot.interrupts, answer, decisions, default)
        elif not snapshot.next:  # stopped before its first checkpoint: start it again
            command = self._graph_input(row.input, row.template, None)
        await self._prepare()
        queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue()
        reserved = row.last_seq + SEQS_WITH_ROW
        emitter = self._emitter(run_id, queue, row.last_seq, reserved)
        ctx = self._context(run_id, row.thread_id, emitter, row.user_id)
        await self.backend.runs.update(run_id, status="running", last_seq=reserved)
        self._replay_preamble(ctx, snapshot.values, await self.ledger.load(run_id))
        async with aclosing(self._drive(command, ctx, queue)) as events:
            async for event in events:
                yield event

    def _graph_input(self, request: str, template: str | None, plan: Plan | None) -> dict[str, Any]:
        graph_input: dict[str, Any] = {"request": request}
        if self.team.pattern == "workflow":
            graph_input |= workflow.graph_input(self.team, template, plan)
        return graph_input

    async def pending(self, run_id: str) -> list[dict[str, Any]]:
        """What a paused run waits for: clarifying questions and tool calls to approve."""
        row = await self.backend.runs.get(run_id)
        snapshot = await self.graph.aget_state(self._config(row.thread_id))
        return pending_requests(snapshot.interrupts)

    def _replay_preamble(
        self, ctx: RunContext, state: Mapping[str, Any], done: Mapping[str, StepRecord]
    ) -> None:
        if state.get("planner_usage"):
            ctx.usage.add("planner", None, TokenUsage.model_validate(state["planner_usage"]))
        ctx.emit(Resumed, completed_steps=sorted(k for k, r in done.items() if r.status == "done"))
        if state.get("plan"):
            plan = Plan.model_validate(state["plan"])
            workflow.emit_plan(ctx, plan, state.get("tier", "llm"), state.get("notes"))

    async def run(self, request: str, **options: Any) -> RunResult:
        """Run to the end and return the result."""
        run_id = options.pop("run_id", None) or uuid.uuid4().hex
        async for _ in self.stream(request, run_id=run_id, **options):
            pass
        return self._finished.pop(run_id, None) or await self.result(run_id)

    async def resume(self, run_id: str) -> RunResult:
        async for _ in self.resume_stream(run_id):
            pass
        return self._finished.pop(run_id, None) or await self.result(run_id)

    async def result(self, run_id: str) -> RunResult:
        """The stored result of a run (finished or not)."""
        row = await self.backend.runs.get(run_id)
        state = (await self.graph.aget_state(self._config(row.thread_id))).values
        plan = state.get("plan")
        records = await self.ledger.load(run_id)
        return RunResult(
            run_id=run_id,
            thread_id=row.thread_id,
            status=row.status,
            output=row.output or "",
            error=row.error or "",
            planner_tier=row.planner_tier,
            plan=plan,
            steps=_steps(plan, records),
            usage=TokenUsage(
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cost_usd=row.cost_usd,
            ),
            usage_by_agent={k: TokenUsage.model_validate(v) for k, v in row.usage_by_agent.items()},
        )

    def _context(
        self, run_id: str, thread_id: str, emitter: Emitter, user_id: str | None = None
    ) -> RunContext:
        user = user_id or self.user_id
        return RunContext(
            run_id=run_id,
            thread_id=thread_id,
            team=self.team,
            emitter=emitter,
            models=self.models,
            tools=self.registry,
            tool_resources=ToolResources(
                knowledge=self.backend.knowledge,
                store=self.backend.store,
                notes_namespace=("teamgraph", "notes", self.team.name, user),
            ),
            store=self.backend.store,
            user_id=user,
            ledger=self.ledger,
            usage=UsageTracker(self.prices, self.team.budget),
            templates=self.templates,
        )

    def _emitter(
        self,
        run_id: str,
        queue: asyncio.Queue[BaseEvent | None],
        start_seq: int = 0,
        reserved: int | None = None,
    ) -> Emitter:
        def reserve(upto: int) -> None:
            task = asyncio.get_running_loop().create_task(
                self.backend.runs.update(run_id, last_seq=upto)
            )
            self._reservations.add(task)
            task.add_done_callback(self._reservations.discard)

        return Emitter(run_id, queue.put_nowait, start_seq, reserve=reserve, reserved=reserved)

    def _config(self, thread_id: str) -> RunnableConfig:
        # supersteps: a swarm turn takes two per handoff, a supervisor turn two per decision
        limit = 2 * max(self.team.swarm.max_handoffs, self.team.supervisor.max_turns) + 50
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": max(100, limit)}

    async def _drive(
        self,
        graph_input: Any,
        ctx: RunContext,
        queue: asyncio.Queue[BaseEvent | None],
        begin: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncGenerator[Event, None]:
        task = asyncio.create_task(self._invoke(graph_input, ctx, queue, begin))
        try:
            while (event := await queue.get()) is not None:
                yield event  # type: ignore[misc]
        finally:
            if not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
                if not ctx.closed:  # cancelled before it began: record that it stopped
                    ctx.emit(RunCancelled, reason="cancelled")
                    await self._save(ctx, status="cancelled", error="cancelled")
            else:
                task.result()

    async def _invoke(
        self,
        graph_input: Any,
        ctx: RunContext,
        queue: asyncio.Queue[BaseEvent | None],
        begin: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        try:
            if begin is not None:
                await begin()
            async with self.slots or nullcontext():  # started and announced; now execute
                final = await self.graph.ainvoke(
                    graph_input, self._config(ctx.thread_id), context=ctx, durability="sync"
                )
            if final.get("__interrupt__"):
                await self._pause(ctx, final["__interrupt__"])
            else:
                await self._finish(ctx, final)
        except BudgetExceeded as exc:
            state = (await self.graph.aget_state(self._config(ctx.thread_id))).values
            await self._finish(ctx, {**state, "status": "budget_exceeded", "error": str(exc)})
        except asyncio.CancelledError:
            ctx.emit(RunCancelled, reason="cancelled")
            await self._save(ctx, status="cancelled", error="cancelled")
            raise
        except Exception as exc:
            ctx.emit(RunFailed, error=f"{type(exc).__name__}: {exc}")
            await self._save(ctx, status="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            queue.put_nowait(None)

    async def _pause(self, ctx: RunContext, interrupts: list[Any]) -> None:
        emit_pauses(ctx, pending_requests(interrupts))
        await self._save(ctx, status="interrupted", finished_at=None)

    async def _finish(self, ctx: RunContext, final: Mapping[str, Any]) -> None:
        status, output = final.get("status", "completed"), final.get("output", "")
        error = final.get("error", "")
        ctx.emit(RunCompleted, status=status, output=output, usage=ctx.usage.total)
        await self._save(
            ctx, status=status, output=output, planner_tier=final.get("tier"), error=error or None
        )
        records = final.get("steps", {})  # as the ledger saved them (JSON): StepResult validates
        self._finished[ctx.run_id] = RunResult(
            run_id=ctx.run_id,
            thread_id=ctx.thread_id,
            status=status,
            output=output,
            error=error,
            planner_tier=final.get("tier"),
            plan=final.get("plan"),
            steps=_steps(final.get("plan"), records),
            usage=ctx.usage.total,
            usage_by_agent=dict(ctx.usage.by_agent),
        )

    async def _save(self, ctx: RunContext, **fields: Any) -> None:
        ctx.closed = True
        await asyncio.gather(*self._reservations)  # never let a late reservation overwrite this
        total = ctx.usage.total
        await self.backend.runs.update(
            ctx.run_id,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cost_usd=total.cost_usd,
            last_seq=ctx.emitter.seq,
            usage_by_agent={k: v.model_dump() for k, v in ctx.usage.by_agent.items()},
            **{"finished_at": utcnow(), **fields},
        )


def _knowledge(team: TeamSpec) -> list[str]:
    """The knowledge paths of a team and of its nested teams."""
    paths = list(team.knowledge)
    for member in team.members:
        if isinstance(member, TeamSpec):
            paths += _knowledge(member)
    return paths


def _steps(plan: Mapping[str, Any] | None, records: Mapping[str, Any]) -> list[StepResult]:
    return [
        StepResult(id=s["id"], worker=s["worker"], task=s["task"], **_record(records, s["id"]))
        for s in (plan or {}).get("steps", [])
    ]


def _record(records: Mapping[str, Any], step_id: str) -> dict[str, Any]:
    """A step's result fields from its :class:`StepRecord` (or the record's JSON form)."""
    record = records.get(step_id)
    if record is None:
        return {"status": "pending"}
    if isinstance(record, StepRecord):
        record = record.__dict__
    return {k: record[k] for k in RESULT_FIELDS if k in record}
