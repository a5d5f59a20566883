"""The contract between the runtime and the patterns.

Every pattern is a :class:`Pattern`: it builds its graph, says what a new run's input is (and
announces what that input decided), gives the config of a thread, and folds the graph's state
into an :class:`Outcome` — status, answer, plan, step records, shared state — which the
runtime turns into events, run rows and a :class:`~teamgraph.result.RunResult`
(:func:`build_result`, for a run that just ended and for one read back later) without knowing
which pattern ran. Every pattern's state extends :class:`RunState`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from teamgraph.durable import StepRecord
from teamgraph.events import RunStatus, TokenUsage
from teamgraph.plan import Plan, PlanDecision
from teamgraph.planning.templates import Template
from teamgraph.result import RunResult, StepResult
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec

Graph = CompiledStateGraph[Any, Any, Any, Any]
MIN_SUPERSTEPS = 100


class RunState(TypedDict, total=False):
    """What every pattern's state holds: the request of the run, how it ended, its answer, and
    the team's shared state (``initial_state``), kept per thread."""

    request: str
    status: RunStatus
    output: str
    error: str
    shared_state: dict[str, Any]


@dataclass
class Outcome:
    """What a run came to (or has come to so far), as the runtime folds it."""

    status: RunStatus = "running"
    output: str = ""
    error: str = ""
    plan: PlanDecision | None = None
    steps: dict[str, StepRecord] = field(default_factory=dict)  # by step id
    shared_state: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunInput:
    """What a new run is asked: the request, and for workflows a template or explicit plan
    (``templates``: the ones the team may name, by name)."""

    request: str
    template: str | None = None
    plan: Plan | None = None
    templates: Mapping[str, Template] = field(default_factory=dict)


def plain_input(team: TeamSpec, run: RunInput) -> dict[str, Any]:
    """The input of a pattern that needs only the request."""
    return {"request": run.request}


def plain_outcome(values: Mapping[str, Any]) -> Outcome:
    """The outcome of a pattern whose state holds only :class:`RunState`'s keys."""
    return Outcome(
        status=values.get("status", "running"),
        output=str(values.get("output", "")),
        error=str(values.get("error", "")),
        shared_state=values.get("shared_state"),
    )


async def no_announcement(ctx: RunContext, run_input: Any, fresh: bool) -> None:
    """What a pattern announces of a run's input before its graph runs: nothing, unless the
    input decided something its graph would have announced (a workflow's given plan). The
    input is a new run's (``fresh``: its first execution) or a run's that starts again."""


@dataclass(frozen=True)
class Pattern:
    """One orchestration pattern, as the runtime sees it."""

    name: str
    build: Callable[[TeamSpec, BaseCheckpointSaver[Any] | None], Graph]
    start: Callable[[TeamSpec, RunInput], dict[str, Any]] = plain_input
    outcome: Callable[[Mapping[str, Any]], Outcome] = plain_outcome
    supersteps: Callable[[TeamSpec], int] = lambda team: 100  # LangGraph's recursion limit
    announce_input: Callable[[RunContext, Any, bool], Awaitable[None]] = no_announcement

    def thread_config(self, team: TeamSpec, thread_id: str) -> RunnableConfig:
        """LangGraph's config for a thread of ``team`` (its checkpoints, its limits): a run's
        thread, or a nested team's."""
        limit = max(MIN_SUPERSTEPS, self.supersteps(team))
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": limit}


# --- outcomes -------------------------------------------------------------------------------------
# One way to turn an :class:`~teamgraph.patterns.contract.Outcome` into a
# :class:`~teamgraph.result.RunResult`, for a run that just ended and for one read back later.


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
