"""The ``function`` agent: native tool calling; several calls in one turn run concurrently and
their results go back in call order."""

from __future__ import annotations

import asyncio

from teamgraph.agents.base import (
    AgentExtras,
    AgentOutcome,
    answer_at_limit,
    empty_reply_guard,
    flatten_tool_calls,
    open_turn,
    worker_system,
)
from teamgraph.brief import Assignment
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec


async def run_function_agent(
    agent: AgentSpec,
    assignment: Assignment,
    ctx: RunContext,
    step_id: str | None = None,
    extras: AgentExtras | None = None,
) -> AgentOutcome:
    """Call the model; run the tools it asks for; repeat until it answers, hands off, or hits
    the limit."""
    turn, toolbox = open_turn(
        agent, assignment, ctx, step_id, extras, lambda _: worker_system(agent)
    )
    tools = list(toolbox.tools.values())
    bound = turn.model.bind_tools(tools) if tools else turn.model
    warned = False
    for _ in range(agent.max_iterations):
        reply = await turn.ask(bound)
        turn.messages.append(reply)
        if reply.tool_calls:
            key = turn.key
            calls = reply.tool_calls
            results = await asyncio.gather(
                *(toolbox.call_message(c, key.tool(i)) for i, c in enumerate(calls))
            )
            turn.messages.extend(results)
            if toolbox.handoff:
                return turn.handoff(toolbox.handoff)
        elif reply.text.strip():
            return turn.finish(reply.text)
        else:
            warned = empty_reply_guard(turn, warned)
    return await answer_at_limit(turn, flatten_tool_calls)
