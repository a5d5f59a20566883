"""Running a team member — an agent, or a nested team of any pattern run as a subgraph."""

from __future__ import annotations

import dataclasses
import zlib

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_SCRATCHPAD, NS_SEP
from langgraph.config import get_config

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
    final = await graph.ainvoke(
        {"request": assignment.text}, _nested_config(child.ledger_key), context=child
    )
    if final.get("status") == "budget_exceeded" and ctx.usage.exceeded is not None:
        raise ctx.usage.exceeded  # the budget is the whole run's, not the nested team's
    return AgentOutcome(str(final.get("output", "")), [])


def _nested_config(key: str) -> RunnableConfig:
    """The nested team's checkpoint namespace, named by ``key`` (its step or agent path).

    LangGraph names a subgraph by its parent task plus a counter of the subgraphs that task has
    started so far. A workflow task runs its ready steps concurrently, and a resumed task skips
    the steps already finished, so that counter differs between executions: a resumed nested
    team would find another step's checkpoints (and their answer). Here the name is a number
    derived from ``key`` — stable whatever ran before — and the counter is not appended."""
    configurable = get_config()["configurable"]
    namespace = f"{configurable.get(CONFIG_KEY_CHECKPOINT_NS, '')}{NS_SEP}{_number(key)}"
    patched = {**configurable, CONFIG_KEY_CHECKPOINT_NS: namespace}
    scratchpad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is not None:
        patched[CONFIG_KEY_SCRATCHPAD] = dataclasses.replace(scratchpad, subgraph_counter=_zero)
    return {"configurable": patched}


def _number(key: str) -> int:
    return zlib.crc32(key.encode()) + 1  # digits: LangGraph reads it as a subgraph's counter


def _zero() -> int:
    return 0
