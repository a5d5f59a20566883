"""Running workflow steps: eager scheduling, per-step fault isolation, durable results."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from teamgraph import prompts
from teamgraph.durable import StepRecord
from teamgraph.errors import AwaitingHuman, BudgetExceeded, RunStop
from teamgraph.events import StepCompleted, StepFailed, StepSkipped, StepStarted, StepState
from teamgraph.faults import point
from teamgraph.patterns._members import run_member
from teamgraph.patterns._scheduler import Schedule
from teamgraph.plan import Plan, Step
from teamgraph.run_context import RunContext

CHARS_PER_TOKEN = 4


async def execute_plan(
    plan: Plan, ctx: RunContext
) -> tuple[dict[str, StepRecord], BudgetExceeded | None]:
    """Run every step as soon as its own dependencies are done, up to ``max_parallel`` at once.

    Finished steps found in the ledger (a resumed run) are not run again; steps it shows started
    run again without being announced again. A budget overrun stops the run: running steps are
    cancelled, the rest skipped, finished results kept."""
    saved = await ctx.ledger.load(ctx.ledger_key)
    mine = {s.id: saved[s.id] for s in plan.steps if _same_step(saved.get(s.id), s)}
    records = {k: r for k, r in mine.items() if r.status != "running"}
    states: dict[str, StepState] = {s.id: "pending" for s in plan.steps}
    states.update({k: r.status for k, r in records.items()})
    execution = _Execution(plan, Schedule(plan, states), records, ctx)
    execution.announced = {k for k, r in mine.items() if r.status == "running"}
    for record in records.values():  # recorded, but the crash came before its event was stored
        if ctx.outcome_key(record.worker, record.step_id) not in ctx.reported:
            _report(ctx, record)
    try:
        await execution.run()
    finally:
        execution.cancel()
    return records, execution.over


class _Execution:
    """One pass over a plan. A step's own task records its result (ledger first, then the event)
    and starts the dependants it made ready, so a dependant starts without a round trip through
    this loop; the loop hears of every ended task through a done callback (O(1), whatever the
    number of running steps) and handles the rest: skips, stops, budgets, approvals, the end."""

    def __init__(
        self, plan: Plan, schedule: Schedule, records: dict[str, StepRecord], ctx: RunContext
    ) -> None:
        self.steps = {s.id: s for s in plan.steps}
        self.schedule = schedule
        self.records = records
        self.ctx = ctx
        self.running: dict[asyncio.Task[StepRecord | None], str] = {}
        self.recording: set[asyncio.Task[StepRecord | None]] = set()  # past the model: no cancel
        self.busy = 0  # steps between start and their outcome (the max_parallel slots in use)
        self.stopped = False
        self.finished: deque[asyncio.Task[StepRecord | None]] = deque()
        self.wakeup: asyncio.Future[None] | None = None
        self.over: BudgetExceeded | None = None
        self.announced: set[str] = set()  # steps an earlier execution started (and announced)

    async def run(self) -> None:
        while True:
            await self._skip_blocked()
            reason = self._stop_reason()
            if reason and (self.over is None or not self.running):  # a budget lets admitted
                await self._abort(reason)  # steps finish
                return
            if not reason:
                self._start_ready()
            if not self.running:
                return
            while not self.finished:
                self.wakeup = asyncio.get_running_loop().create_future()
                await self.wakeup
            while self.finished:
                await self._handle(self.finished.popleft())

    def cancel(self) -> None:
        for task in self.running:
            task.cancel()

    def _stop_reason(self) -> str:
        if self.over is not None:
            return str(self.over)
        if self.ctx.team.workflow.fail_fast and self.schedule.failed:
            return f"fail_fast: step {self.schedule.first_failed()!r} failed"
        return ""

    def _start_ready(self) -> None:
        free = self.ctx.team.workflow.max_parallel - self.busy
        if free <= 0 or self.stopped or self._stop_reason():
            return
        budget = self.ctx.team.workflow.context_token_budget
        for step in self.schedule.ready(free):
            self.schedule.set(step.id, "running")
            context = _context(step, self.records, budget)
            self.busy += 1
            task = asyncio.create_task(self._run(step, context))
            self.running[task] = step.id
            task.add_done_callback(self._on_done)

    async def _run(self, step: Step, context: list[tuple[str, str]]) -> StepRecord | None:
        try:
            outcome = await run_step(step, context, self.ctx, step.id in self.announced)
        finally:
            self.busy -= 1
        if outcome is not None:
            task = asyncio.current_task()
            assert task is not None
            self.recording.add(task)  # an abort lets the record be written, then waits for it
            await self._finish(outcome)
            self._start_ready()
        return outcome

    def _on_done(self, task: asyncio.Task[StepRecord | None]) -> None:
        if task not in self.running:
            return  # cancelled by an abort, which waits for it itself
        self.finished.append(task)
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    async def _handle(self, task: asyncio.Task[StepRecord | None]) -> None:
        step_id = self.running.pop(task)
        self.recording.discard(task)
        try:
            outcome = task.result()
        except BudgetExceeded as exc:
            self.over = exc
            self.schedule.set(step_id, "pending")  # never admitted a model call: skipped below
            return
        if outcome is None:
            self.schedule.set(step_id, "waiting")  # paused until a human decides on a tool call

    async def _finish(self, record: StepRecord) -> None:
        ctx = self.ctx
        point("step.done")
        await ctx.ledger.save(ctx.ledger_key, record)  # durable before anyone hears of it
        point("step.recorded")
        self.records[record.step_id] = record
        self.schedule.set(record.step_id, record.status)
        _report(ctx, record)

    async def _skip_blocked(self) -> None:
        while blocked := self.schedule.blocked():
            for step_id, reason in blocked.items():
                await self._skip(self.steps[step_id], reason)

    async def _abort(self, reason: str) -> None:
        self.stopped = True
        running, self.running = self.running, {}
        for task in running:
            if task not in self.recording:
                task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self.finished.clear()
        for step in self.schedule.unfinished():
            await self._skip(step, reason)

    async def _skip(self, step: Step, reason: str) -> None:
        record = StepRecord(
            step_id=step.id, worker=step.worker, task=step.task, status="skipped", error=reason
        )
        await self.ctx.ledger.save(self.ctx.ledger_key, record)
        self.records[step.id] = record
        self.schedule.set(step.id, "skipped")
        _report(self.ctx, record)


def _report(ctx: RunContext, record: StepRecord) -> None:
    """Emit a recorded step's outcome (once per run: ``ctx.reported``)."""
    ctx.reported.add(ctx.outcome_key(record.worker, record.step_id))
    common = {"step_id": record.step_id, "worker": record.worker}
    timed = {**common, "elapsed_s": record.elapsed_s}
    if record.status == "done":
        ctx.emit(StepCompleted, record.worker, output=record.output, usage=record.usage, **timed)
    elif record.status == "failed":
        ctx.emit(StepFailed, record.worker, error=record.error, **timed)
    else:
        ctx.emit(StepSkipped, record.worker, reason=record.error or "", **common)


def _same_step(record: StepRecord | None, step: Step) -> bool:
    return record is not None and (record.worker, record.task) == (step.worker, step.task)


async def run_step(
    step: Step, context: list[tuple[str, str]], ctx: RunContext, announced: bool = False
) -> StepRecord | None:
    """One step on its worker. Any exception becomes a failed record: siblings never notice.
    Its start is recorded before it is announced, once (``announced``: an earlier execution
    did both)."""
    if not announced:
        mark = StepRecord(step_id=step.id, worker=step.worker, task=step.task, status="running")
        await ctx.ledger.save(ctx.ledger_key, mark)
        ctx.emit(StepStarted, step.worker, step_id=step.id, worker=step.worker, task=step.task)
    started = time.perf_counter()
    try:
        agent = ctx.team.member(step.worker)
    except KeyError:
        names = ", ".join(m.name for m in ctx.team.members)
        error = f"unknown worker {step.worker!r} (team members: {names})"
        return StepRecord(
            step_id=step.id, worker=step.worker, task=step.task, status="failed", error=error
        )
    try:
        outcome = await run_member(
            agent, prompts.worker_assignment(step.task, context), ctx, step_id=step.id
        )
    except RunStop:
        raise  # stops the whole run, not just this step
    except AwaitingHuman:
        return None  # the step resumes once the human has replied
    except Exception as exc:
        return StepRecord(
            step_id=step.id,
            worker=step.worker,
            task=step.task,
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            elapsed_s=time.perf_counter() - started,
            usage=ctx.step_usage(step.id),
        )
    return StepRecord(
        step_id=step.id,
        worker=step.worker,
        task=step.task,
        status="done",
        output=outcome.output,
        elapsed_s=time.perf_counter() - started,
        usage=ctx.step_usage(step.id),
    )


def _context(step: Step, records: dict[str, StepRecord], budget: int) -> list[tuple[str, str]]:
    """Only this step's dependencies' outputs, each trimmed to its share of the token budget."""
    if not step.depends_on:
        return []
    share = budget * CHARS_PER_TOKEN // len(step.depends_on)
    context = []
    for dep in step.depends_on:
        output = records[dep].output
        if len(output) > share:
            output = output[: max(share - 15, 0)].rstrip() + " …[trimmed]"
        context.append((dep, output))
    return context
