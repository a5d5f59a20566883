"""Turning step results into the run's final answer: ``concat`` (markdown report) or ``llm``."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from teamgraph import prompts
from teamgraph.brief import Brief
from teamgraph.durable import JournalKey, StepRecord
from teamgraph.llm.call import Caller, ask
from teamgraph.plan import Plan, Step
from teamgraph.run_context import RunContext

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
