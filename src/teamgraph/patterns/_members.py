"""Running a team member — an agent, or a nested team of any pattern run as a subgraph."""

from __future__ import annotations

from teamgraph.agents import AgentExtras, AgentOutcome, run_agent
from teamgraph.brief import Assignment
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec


async def run_member(
    member: AgentSpec | TeamSpec,
    assignment: Assignment,
    ctx: RunContext,
    step_id: str | None = None,
    extras: AgentExtras | None = None,
) -> AgentOutcome:
    """An agent runs its loop; a nested team runs its own graph as a subgraph of this one, with
    events under its own path, and hands back its final output."""
    if isinstance(member, AgentSpec):
        return await run_agent(member, assignment, ctx, step_id, extras)
    from teamgraph.patterns import build

    graph = build(member)
    child = ctx.child(member, parent_id=step_id or ctx.team.name)
    final = await graph.ainvoke({"request": assignment.text}, context=child)
    if final.get("status") == "budget_exceeded" and ctx.usage.exceeded is not None:
        raise ctx.usage.exceeded  # the budget is the whole run's, not the nested team's
    return AgentOutcome(str(final.get("output", "")), [])
