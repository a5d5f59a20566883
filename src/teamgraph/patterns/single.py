"""The single pattern: one agent holding a multi-turn conversation.

The thread keeps the conversation in ``messages``: each run adds the user's request and the agent's
answer, and the agent sees the earlier turns (trimmed to a token budget) before the new request.
Tokens stream as ``token`` events from the agent's model calls.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from teamgraph.agents import AgentExtras, AgentOutcome
from teamgraph.brief import Assignment
from teamgraph.errors import RunStop
from teamgraph.patterns._interrupts import with_pauses
from teamgraph.patterns._members import run_member, trimmed_history
from teamgraph.patterns.contract import Pattern, RunState
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec


class SingleState(RunState, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


async def agent_node(state: SingleState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    member = ctx.team.members[0]
    request = state["request"]
    shared = ctx.adopt_state(state.get("shared_state"))
    history = trimmed_history(list(state.get("messages", [])), ctx.team.history_token_budget)
    extras = AgentExtras(history=history)

    async def body(local: RunContext) -> AgentOutcome:
        return await run_member(member, Assignment.of(request), local, extras=extras)

    try:
        outcome = await with_pauses(ctx, body)
    except (GraphBubbleUp, RunStop):
        raise  # a pause for a human, or the run's budget: the runner handles both
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return {"status": "failed", "output": "", "error": error, "shared_state": shared}
    return {
        "messages": [HumanMessage(request), AIMessage(outcome.output, name=member.name)],
        "output": outcome.output,
        "status": "completed",
        "error": "",
        "shared_state": shared,
    }


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[SingleState, RunContext, SingleState, SingleState]:
    """The compiled single-agent graph for ``team`` (its first member answers)."""
    graph = StateGraph(SingleState, context_schema=RunContext)
    graph.add_node("agent", agent_node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer, name=team.name)


PATTERN = Pattern("single", build)
