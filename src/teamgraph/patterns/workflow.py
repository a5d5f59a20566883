"""The workflow pattern: plan → execute (eager, fault-isolated) → synthesize, on LangGraph.

The ``concat`` synthesizer (a pure function of the plan and the step results) runs at the end of
``execute``; the ``llm`` synthesizer is a node of its own.

Checkpoints after each node; inside ``execute`` every finished step is written to the step ledger
(keyed by step id) before its event goes out, so a resumed run re-runs no finished step. A run
given a valid explicit plan, or a known template whose plan fits the team, starts with the plan
already in its input (its first checkpoint) and goes straight to ``execute``: there is nothing
for the plan node to decide."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from teamgraph import prompts
from teamgraph.brief import Brief
from teamgraph.durable import JournalKey, StepRecord
from teamgraph.errors import PlanValidationError
from teamgraph.events import PlanCreated, PlannerTier, RunStatus
from teamgraph.llm.call import Caller, ask
from teamgraph.patterns._interrupts import with_pauses
from teamgraph.patterns._steps import execute_plan
from teamgraph.patterns.contract import Outcome, Pattern, RunInput, RunState, plain_outcome
from teamgraph.patterns.planner import make_plan, plan_rules
from teamgraph.plan import Plan, PlanDecision, Step
from teamgraph.planning.templates import instantiate
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec


class WorkflowState(RunState, total=False):
    template: str | None
    explicit_plan: dict[str, Any] | None
    planned: bool  # the input carries the (validated, explicit) plan: skip the plan node
    plan: dict[str, Any]  # Plan.to_dict()
    tier: str
    notes: list[str]
    stopped: str
    steps: dict[str, dict[str, Any]]


async def plan_node(state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowState:
    ctx = runtime.context
    explicit = state.get("explicit_plan")
    if explicit:
        decision = PlanDecision(plan_rules(ctx.team).check(Plan.from_dict(explicit)), "explicit")
    else:
        decision = await make_plan(state["request"], ctx, state.get("template"))
    await announce_plan(ctx, decision)
    return {**_plan_state(decision), "steps": {}}


def _plan_state(decision: PlanDecision) -> WorkflowState:
    """The state keys that hold a run's plan."""
    return {"plan": decision.plan.to_dict(), "tier": decision.tier, "notes": list(decision.notes)}


def _decision(values: Mapping[str, Any]) -> PlanDecision | None:
    """The run's plan back from its state keys (none before the plan node ran)."""
    if not values.get("plan"):
        return None
    plan = Plan.from_dict(values["plan"])
    return PlanDecision(plan, values.get("tier", "explicit"), tuple(values.get("notes", ())))


def graph_input(team: TeamSpec, run: RunInput) -> dict[str, Any]:
    """A new run's input. A valid explicit plan, or the plan of a known template that fits the
    team, goes in as the run's plan (announced by :func:`announce_input`); an invalid explicit
    plan is left to the plan node, which fails the run with every problem listed, and a
    template that does not fit to the plan node's other tiers, which note why."""
    state: WorkflowState = {
        "request": run.request,
        "template": run.template,
        "explicit_plan": None,
        "planned": False,
    }
    plan: Plan | None = run.plan
    tier: PlannerTier = "explicit"
    template = run.templates.get(run.template) if run.template else None
    if plan is None and template is not None:
        plan, tier = instantiate(template, run.request), "template"
    if plan is None:
        return dict(state)
    try:
        plan = plan_rules(team).check(plan)
    except PlanValidationError:
        return dict(state) if tier == "template" else {**state, "explicit_plan": plan.to_dict()}
    planned = _plan_state(PlanDecision(plan, tier))  # the run's plan from its first checkpoint
    return {**state, "planned": True, **planned, "steps": {}}


def _entry(state: WorkflowState) -> str:
    return "execute" if state.get("planned") else "plan"


async def announce_input(ctx: RunContext, run_input: Any, fresh: bool) -> None:
    """A run whose input carries its plan starts with ``execute``: its plan is announced here,
    before the graph runs, as the plan node announces the plans it makes."""
    if isinstance(run_input, Mapping) and run_input.get("planned"):
        decision = _decision(run_input)
        if decision is not None:
            await announce_plan(ctx, decision, fresh=fresh)


async def announce_plan(ctx: RunContext, decision: PlanDecision, fresh: bool = False) -> None:
    """Emit the run's ``plan_created`` once, though a crash re-runs what emits it (the journal
    records the announcement first; ``fresh``: this execution is the run's first, so nothing
    was announced before)."""
    key = JournalKey.task(ctx.task_scope("plan")).announced()
    if await ctx.journal.mark(key, fresh):
        plan = decision.plan
        ctx.emit(
            PlanCreated,
            plan_name=plan.name,
            tier=decision.tier,
            confidence=plan.confidence,
            reasoning=plan.reasoning,
            steps=plan.to_dict()["steps"],
            notes=list(decision.notes),
        )


async def execute_node(state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowState:
    ctx = runtime.context
    shared = ctx.adopt_state(state.get("shared_state"))
    plan = Plan.from_dict(state["plan"])
    records, over = await with_pauses(ctx, lambda local: execute_plan(plan, local))
    stopped = str(over) if over else ""
    update: WorkflowState = {
        "steps": {k: r.model_dump(mode="json") for k, r in records.items()},
        "shared_state": shared,
        "stopped": stopped,
    }
    if ctx.team.workflow.synthesizer != "llm":  # concat: no model to wait for, conclude here
        update |= conclusion(concat_report(plan, records), records, stopped, ctx)
    return update


async def synthesize_node(state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowState:
    """The ``llm`` synthesizer, a node of its own: its model call follows a checkpoint that
    holds every step result."""
    ctx = runtime.context
    plan = Plan.from_dict(state["plan"])
    records = {k: StepRecord.model_validate(v) for k, v in state["steps"].items()}
    output = await llm_answer(state["request"], plan, records, ctx)
    return conclusion(output, records, state.get("stopped", ""), ctx)


def conclusion(
    output: str, records: dict[str, StepRecord], stopped: str, ctx: RunContext
) -> WorkflowState:
    if stopped:
        return {"output": output, "status": "budget_exceeded", "error": stopped}
    status = run_status(records, ctx.team.workflow.fail_fast)
    return {"output": output, "status": status, "error": ""}  # no earlier run's error stays


def run_status(records: dict[str, StepRecord], fail_fast: bool) -> RunStatus:
    statuses = [r.status for r in records.values()]
    if all(s == "done" for s in statuses):
        return "completed"
    if fail_fast or "done" not in statuses:
        return "failed"
    return "completed_with_errors"


def outcome(values: Mapping[str, Any]) -> Outcome:
    """The run's plan (with its tier), its step records, and how it ended."""
    folded = plain_outcome(values)
    folded.plan = _decision(values)
    folded.steps = {k: StepRecord.model_validate(v) for k, v in values.get("steps", {}).items()}
    return folded


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[WorkflowState, RunContext, WorkflowState, WorkflowState]:
    """The compiled workflow graph for ``team``."""
    graph = StateGraph(WorkflowState, context_schema=RunContext)
    graph.add_node("plan", plan_node)
    graph.add_node("execute", execute_node)
    graph.add_conditional_edges(START, _entry, ["plan", "execute"])
    graph.add_edge("plan", "execute")
    if team.workflow.synthesizer == "llm":
        graph.add_node("synthesize", synthesize_node)
        graph.add_edge("execute", "synthesize")
        graph.add_edge("synthesize", END)
    else:
        graph.add_edge("execute", END)  # the concat report is written by execute itself
    return graph.compile(checkpointer=checkpointer, name=team.name)


PATTERN = Pattern(
    "workflow", build, start=graph_input, outcome=outcome, announce_input=announce_input
)


# --- synthesis: Turning step results into the run's final answer: ``concat`` (markdown report) or
# ``llm``.
NO_RESULTS = "No results to synthesize."
SYNTHESIZER = "synthesizer"  # the role: its model override and the usage it is charged


def concat_report(plan: Plan, records: dict[str, StepRecord]) -> str:
    """``# Workflow Results: <plan>``, ``*Completed N steps*``, then one section per step; a
    plan of one step that is done: that step's output, as it is."""
    ordered = [(s, records[s.id]) for s in plan.steps if s.id in records]
    if not ordered:
        return NO_RESULTS
    if len(plan.steps) == 1 and ordered[0][1].status == "done":
        return ordered[0][1].output
    done = sum(1 for _, r in ordered if r.status == "done")
    sections = [_section(s, r) for s, r in ordered]
    header = f"# Workflow Results: {plan.name}\n\n*Completed {done} steps*"
    return header + "\n\n" + "\n\n---\n\n".join(sections)


def _section(step: Step, record: StepRecord) -> str:
    head = f"### Step: {step.id} (Worker: {step.worker})\n\n**Task**: {step.task}\n\n"
    if record.status == "done":
        return head + record.output
    label = "Failed" if record.status == "failed" else "Skipped"
    return head + f"**{label}**: {record.error}"


async def llm_answer(
    request: str, plan: Plan, records: dict[str, StepRecord], ctx: RunContext
) -> str:
    """Ask the team's model for the final answer from the successful steps' outputs."""
    results = [
        (s.id, s.worker, records[s.id].output)
        for s in plan.steps
        if s.id in records and records[s.id].status == "done"
    ]
    if not results:
        return NO_RESULTS
    team = ctx.team
    model, name = ctx.models.for_role(SYNTHESIZER, team.model, team.model_kwargs)
    messages = [
        SystemMessage(prompts.synthesizer_system(team.name)),
        HumanMessage(prompts.synthesizer_prompt(request, results)),
    ]
    context = tuple((f"{sid} ({worker})", output) for sid, worker, output in results)
    brief = Brief(role="synthesizer", request=request, context=context)
    key = JournalKey.task(ctx.task_scope(SYNTHESIZER)).model_call(1)
    reply = await ask(ctx, Caller(SYNTHESIZER, model, name), messages, key, brief)
    return reply.text
