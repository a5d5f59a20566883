"""Running workflow steps: eager scheduling, per-step fault isolation, durable results."""

from __future__ import annotations

import asyncio
import time

from teamgraph import prompts
from teamgraph.errors import ApprovalPending, BudgetExceeded
from teamgraph.events import StepCompleted, StepFailed, StepSkipped, StepStarted, StepState
from teamgraph.ledger import StepRecord
from teamgraph.patterns._members import run_member
from teamgraph.patterns._scheduler import blocked_steps, ready_steps
from teamgraph.plan import Plan, Step
from teamgraph.run_context import RunContext

CHARS_PER_TOKEN = 4


async def execute_plan(
    plan: Plan, ctx: RunContext
) -> tuple[dict[str, StepRecord], BudgetExceeded | None]:
    """Run every step as soon as its own dependencies are done, up to ``max_parallel`` at once.

    Finished steps found in the ledger (a resumed run) are not run again. A budget overrun stops
    the run: running steps are cancelled, the rest skipped, finished results kept."""
    saved = await ctx.ledger.load(ctx.ledger_key)
    records = {s.id: saved[s.id] for s in plan.steps if _same_step(saved.get(s.id), s)}
    for record in records.values():
        ctx.usage.add(record.worker, record.step_id, record.usage)
    states: dict[str, StepState] = {s.id: "pending" for s in plan.steps}
    states.update({k: r.status for k, r in records.items()})
    running: dict[asyncio.Task[StepRecord | None], str] = {}
    over: BudgetExceeded | None = None
    try:
        while True:
            await _skip_blocked(plan, states, records, ctx)
            reason = _stop_reason(states, ctx, over)
            if reason and (over is None or not running):  # a budget lets admitted steps finish
                await _abort(plan, states, records, running, ctx, reason)
                break
            if not reason:
                _start_ready(plan, states, records, running, ctx)
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                step_id = running.pop(task)
                try:
                    outcome = task.result()
                except BudgetExceeded as exc:
                    over = exc
                    states[step_id] = "pending"  # never admitted a model call: skipped below
                    continue
                if outcome is None:
                    states[step_id] = "waiting"  # paused until a human decides on a tool call
                else:
                    await _finish(outcome, states, records, ctx)
    finally:
        for task in running:
            task.cancel()
    return records, over


def _stop_reason(states: dict[str, StepState], ctx: RunContext, over: BudgetExceeded | None) -> str:
    if over is not None:
        return str(over)
    if ctx.team.workflow.fail_fast and "failed" in states.values():
        failed = next(k for k, v in states.items() if v == "failed")
        return f"fail_fast: step {failed!r} failed"
    return ""


def _same_step(record: StepRecord | None, step: Step) -> bool:
    return record is not None and (record.worker, record.task) == (step.worker, step.task)


def _start_ready(
    plan: Plan,
    states: dict[str, StepState],
    records: dict[str, StepRecord],
    running: dict[asyncio.Task[StepRecord | None], str],
    ctx: RunContext,
) -> None:
    free = ctx.team.workflow.max_parallel - len(running)
    for step in ready_steps(plan, states)[: max(free, 0)]:
        states[step.id] = "running"
        context = _context(step, records, ctx.team.workflow.context_token_budget)
        running[asyncio.create_task(run_step(step, context, ctx))] = step.id


async def _finish(
    record: StepRecord,
    states: dict[str, StepState],
    records: dict[str, StepRecord],
    ctx: RunContext,
) -> None:
    await ctx.ledger.save(ctx.ledger_key, record)  # durable before anyone hears of it
    states[record.step_id] = record.status
    records[record.step_id] = record
    if record.status == "done":
        ctx.emit(
            StepCompleted,
            record.worker,
            step_id=record.step_id,
            worker=record.worker,
            output=record.output,
            elapsed_s=record.elapsed_s,
            usage=record.usage,
        )
    else:
        ctx.emit(
            StepFailed,
            record.worker,
            step_id=record.step_id,
            worker=record.worker,
            error=record.error,
            elapsed_s=record.elapsed_s,
        )


async def _skip_blocked(
    plan: Plan, states: dict[str, StepState], records: dict[str, StepRecord], ctx: RunContext
) -> None:
    while blocked := blocked_steps(plan, states):
        for step_id, reason in blocked.items():
            await _skip(plan.step(step_id), reason, states, records, ctx)


async def _abort(
    plan: Plan,
    states: dict[str, StepState],
    records: dict[str, StepRecord],
    running: dict[asyncio.Task[StepRecord | None], str],
    ctx: RunContext,
    reason: str,
) -> None:
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    running.clear()
    for step in plan.steps:
        if states[step.id] in ("pending", "running", "waiting"):
            await _skip(step, reason, states, records, ctx)


async def _skip(
    step: Step,
    reason: str,
    states: dict[str, StepState],
    records: dict[str, StepRecord],
    ctx: RunContext,
) -> None:
    record = StepRecord(
        step_id=step.id, worker=step.worker, task=step.task, status="skipped", error=reason
    )
    await ctx.ledger.save(ctx.ledger_key, record)
    states[step.id] = "skipped"
    records[step.id] = record
    ctx.emit(StepSkipped, step.worker, step_id=step.id, worker=step.worker, reason=reason)


async def run_step(
    step: Step, context: list[tuple[str, str]], ctx: RunContext
) -> StepRecord | None:
    """One step on its worker. Any exception becomes a failed record: siblings never notice."""
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
            agent, prompts.worker_prompt(step.task, context), ctx, step_id=step.id
        )
    except BudgetExceeded:
        raise  # stops the whole run, not just this step
    except ApprovalPending:
        return None  # the step resumes once the human has decided
    except Exception as exc:
        return StepRecord(
            step_id=step.id,
            worker=step.worker,
            task=step.task,
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            elapsed_s=time.perf_counter() - started,
            usage=ctx.usage.by_step[step.id],
        )
    return StepRecord(
        step_id=step.id,
        worker=step.worker,
        task=step.task,
        status="done",
        output=outcome.output,
        elapsed_s=time.perf_counter() - started,
        usage=ctx.usage.by_step[step.id],
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
