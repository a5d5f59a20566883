"""One way to turn an :class:`~teamgraph.patterns.contract.Outcome` into a
:class:`~teamgraph.result.RunResult`, for a run that just ended and for one read back later."""

from __future__ import annotations

from collections.abc import Mapping

from teamgraph.durable import StepRecord
from teamgraph.events import RunStatus, TokenUsage
from teamgraph.patterns.contract import Outcome
from teamgraph.plan import Plan
from teamgraph.result import RunResult, StepResult


def build_result(
    run_id: str,
    thread_id: str,
    outcome: Outcome,
    *,
    usage: TokenUsage,
    usage_by_agent: Mapping[str, TokenUsage],
    status: RunStatus | None = None,
    output: str | None = None,
    error: str | None = None,
) -> RunResult:
    """The result of a run; ``status``, ``output`` and ``error`` override the outcome's (a
    stored run's row knows how its execution ended: paused, cancelled, failed)."""
    info = outcome.plan
    return RunResult(
        run_id=run_id,
        thread_id=thread_id,
        status=status or outcome.status,
        output=outcome.output if output is None else output,
        error=outcome.error if error is None else error,
        planner_tier=info.tier if info else None,
        plan=info.plan if info else None,
        steps=steps(info.plan if info else None, outcome.steps),
        shared_state=outcome.shared_state,
        usage=usage,
        usage_by_agent=dict(usage_by_agent),
    )


def steps(plan: Plan | None, records: Mapping[str, StepRecord]) -> list[StepResult]:
    """Every step of the plan, in plan order, as its record has it (``pending`` without one)."""
    out = []
    for step in plan.steps if plan else []:
        record = records.get(step.id)
        if record is None:
            out.append(StepResult(id=step.id, worker=step.worker, task=step.task, status="pending"))
            continue
        out.append(
            StepResult(
                id=step.id,
                worker=step.worker,
                task=step.task,
                status=record.status,
                output=record.output,
                error=record.error,
                elapsed_s=record.elapsed_s,
                usage=record.usage,
            )
        )
    return out
