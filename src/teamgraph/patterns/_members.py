"""Running a team member — an agent, or a nested team of any pattern on a thread of its own —
and the conversation history it is handed (:func:`trimmed_history`).

A nested team's graph is a graph like the run's: invoked with a plain config of its own — its
own thread, with the run's checkpointer — never as a subgraph borrowing its parent's
checkpoint namespace. Its thread is named by the run's thread, the graph task that runs it and
its place in the team (:func:`nested_thread`), so a re-executed task (after a crash or a pause)
finds the nested team where it stopped, whatever else that task has run or skipped, and a team
picked twice (two supervisor turns) works on two threads. The nested team's pauses become its
parent's (:func:`~teamgraph.patterns._interrupts.nested_replies`): the run pauses once, with
everything asked, and the replies are handed down on resume."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.types import Command, Interrupt

from teamgraph.agents import AgentExtras, AgentOutcome, run_agent
from teamgraph.brief import Assignment
from teamgraph.errors import AwaitingHuman
from teamgraph.patterns._interrupts import nested_replies
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
    """An agent runs its loop; a nested team runs its own graph on its own thread, with events
    under its own path, and hands back its final output."""
    if isinstance(member, AgentSpec):
        return await run_agent(member, assignment, ctx, step_id, extras)
    final = await _run_team(member, assignment, ctx, step_id or ctx.team.name)
    if final.get("status") == "budget_exceeded" and ctx.usage.exceeded is not None:
        raise ctx.usage.exceeded  # the budget is the whole run's, not the nested team's
    return AgentOutcome(str(final.get("output", "")), [])


def nested_thread(ctx: RunContext, parent_id: str, team: TeamSpec) -> str:
    """The thread of ``team`` working for ``parent_id`` (a step or an agent) in the graph task
    running now: stable when that task is executed again."""
    return f"{ctx.thread_id}/{ctx.task_scope(f'{parent_id}/{team.name}')}"


async def _run_team(
    team: TeamSpec, assignment: Assignment, ctx: RunContext, parent_id: str
) -> dict[str, Any]:
    """The nested team's final state: started, continued where it stopped (or read back, when it
    finished before), resumed with the replies its pauses were given. A pause with no reply
    yet raises :class:`AwaitingHuman` (what it waits for is in ``ctx``'s pass)."""
    from teamgraph.patterns import pattern_of

    pattern = pattern_of(team)
    graph = pattern.build(team, ctx.checkpointer)
    config = pattern.thread_config(team, nested_thread(ctx, parent_id, team))
    graph_input: Any = {"request": assignment.text}
    if ctx.checkpointer is not None:
        snapshot = await graph.aget_state(config)
        if snapshot.interrupts:
            graph_input = _resume(snapshot.interrupts, ctx)
        elif snapshot.metadata is not None:
            graph_input = None  # continue from its last checkpoint (its end, if it finished)
    child = ctx.child(team, parent_id=parent_id)
    while True:
        final: dict[str, Any] = await graph.ainvoke(
            graph_input, config, context=child, durability="sync"
        )
        if not final.get("__interrupt__"):
            return final
        graph_input = _resume(final["__interrupt__"], ctx)  # a pause replied to already: go on


def _resume(interrupts: Sequence[Interrupt], ctx: RunContext) -> Command[Any]:
    values = nested_replies(interrupts, ctx)
    if values is None:
        raise AwaitingHuman("a nested team waits for a human")
    return Command(resume=values)


# --- history -------------------------------------------------------------------------------------
# Conversation history handed to agents, trimmed to the team's token budget.


def trimmed_history(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    """The latest turns within ``budget`` approximate tokens, starting on a user message (so no
    tool result is cut from its call); system messages are kept."""
    if not messages:
        return []
    kept: list[BaseMessage] = trim_messages(
        list(messages),
        max_tokens=budget,
        strategy="last",
        token_counter=count_tokens_approximately,
        include_system=True,
        start_on="human",
        allow_partial=False,
    )
    return kept
