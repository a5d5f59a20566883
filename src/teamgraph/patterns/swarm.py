"""The swarm pattern: agents hand the conversation to each other with ``transfer_to_<agent>`` tools.

One node per member. A turn starts with the thread's active agent (kept in the checkpointed state
between turns), else ``swarm.default_agent``, else the first member. The agent works the user's
message with the conversation so far and either answers — the turn ends — or calls a handoff
tool: its turn ends and the target agent continues the same conversation. Each agent holds
handoff tools for its ``can_handoff_to`` (all other members when empty) and nothing else, so a
call to any other agent is a tool error the model sees ("Tool transfer_to_zed not found.
Available: ...") and never reaches the graph.

A turn stops as ``failed`` after ``swarm.max_handoffs`` handoffs, or earlier on ping-pong: two
agents handing the conversation back and forth (A → B → A → B) without calling any other tool or
answering in between.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, get_type_hints

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
)
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from teamgraph import prompts
from teamgraph.agents import AgentExtras, AgentOutcome
from teamgraph.brief import Assignment
from teamgraph.errors import SpecError
from teamgraph.events import Handoff
from teamgraph.patterns._interrupts import with_pauses
from teamgraph.patterns._members import run_member, trimmed_history
from teamgraph.patterns.contract import Pattern, RunState
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec
from teamgraph.tools.handoff import handoff_tool_name, make_handoff_tool

TURN_NODE = "_turn"  # member names start with a letter, so this never collides


class SwarmState(RunState, total=False):
    messages: Annotated[list[AnyMessage], add_messages]  # the thread's conversation
    active_agent: str  # who has the conversation; persists across turns
    handoffs: int  # handoffs in this turn
    bounces: list[str]  # agents in this turn's current chain of handoffs that did nothing else


STATE_KEYS = frozenset(get_type_hints(SwarmState, include_extras=True))


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[SwarmState, RunContext, SwarmState, SwarmState]:
    """The compiled swarm graph for ``team``."""
    names = [m.name for m in team.members]
    _check_names(team, names)
    tools = {m.name: handoff_tools(team, m) for m in team.members}
    graph = StateGraph(SwarmState, context_schema=RunContext)
    graph.add_node(TURN_NODE, turn_node, destinations=tuple(names))
    for member in team.members:
        node = AgentNode(member, tools[member.name], team)
        graph.add_node(member.name, node, destinations=(*names, END))
    graph.add_edge(START, TURN_NODE)
    return graph.compile(checkpointer=checkpointer, name=team.name)


def handoff_tools(team: TeamSpec, member: AgentSpec | TeamSpec) -> list[BaseTool]:
    """``member``'s handoff tools: to its ``can_handoff_to``, or to every other member."""
    targets = getattr(member, "can_handoff_to", None) or [
        m.name for m in team.members if m.name != member.name
    ]
    return [make_handoff_tool(t, team.member(t).description) for t in targets]


def _check_names(team: TeamSpec, names: list[str]) -> None:
    taken = sorted(set(names) & STATE_KEYS)
    if taken:
        raise SpecError(
            f"team {team.name!r}: swarm member name {taken[0]!r} is reserved for the swarm's "
            f"state; rename the member (reserved: {', '.join(sorted(STATE_KEYS))})"
        )
    seen: dict[str, str] = {}
    for name in names:
        tool = handoff_tool_name(name)
        if tool in seen:
            raise SpecError(
                f"team {team.name!r}: swarm members {seen[tool]!r} and {name!r} would share the "
                f"handoff tool {tool!r}; rename one of them"
            )
        seen[tool] = name


async def turn_node(state: SwarmState, runtime: Runtime[RunContext]) -> Command[str]:
    """A new user turn: reset the turn's counters, go to the thread's active agent."""
    team = runtime.context.team
    names = [m.name for m in team.members]
    active = state.get("active_agent") or team.swarm.default_agent or names[0]
    if active not in names:  # the team changed since the thread's last turn
        active = team.swarm.default_agent or names[0]
    reset = {"active_agent": active, "handoffs": 0, "bounces": [], "output": "", "error": ""}
    return Command(goto=active, update={**reset, "status": "running"})


class AgentNode:
    """The graph node of one member: it works the turn, then answers or hands off."""

    def __init__(self, member: AgentSpec | TeamSpec, tools: list[BaseTool], team: TeamSpec):
        self.member, self.tools, self.team = member, tools, team
        self.tool_names = {t.name for t in tools}

    async def __call__(self, state: SwarmState, runtime: Runtime[RunContext]) -> Command[str]:
        ctx = runtime.context
        shared = ctx.adopt_state(state.get("shared_state"))
        swarm_ctx = replace(ctx, team=self.team)  # same team, handoffs exempt from approvals
        name, request = self.member.name, state.get("request", "")
        first = state.get("handoffs", 0) == 0  # the agent that takes the user's message
        history = trimmed_history(state.get("messages", []), ctx.team.history_token_budget)
        assignment = (
            Assignment.of(request)
            if first
            else prompts.handoff_assignment(_previous(state), request)
        )
        extras = AgentExtras(history=history, tools=self.tools)
        outcome = await with_pauses(
            swarm_ctx, lambda local: run_member(self.member, assignment, local, extras=extras)
        )
        said = _new_messages(outcome, name)
        if first:
            said = [HumanMessage(request), *said]
        if not outcome.handoff:
            answer = {"output": outcome.output, "status": "completed"}
            return Command(goto=END, update={"messages": said, "shared_state": shared, **answer})
        return _hand_off(ctx, state, name, outcome, said, self.tool_names, shared)


def _hand_off(
    ctx: RunContext,
    state: SwarmState,
    name: str,
    outcome: AgentOutcome,
    said: list[BaseMessage],
    tool_names: set[str],
    shared: dict[str, Any],
) -> Command[str]:
    """Route to the agent ``name`` handed off to — unless that would break the limits."""
    target = str(outcome.handoff)
    team = ctx.team
    chain = _bounces(state.get("bounces") or [], name, target, _only_handed_off(said, tool_names))
    error = ""
    if target not in [m.name for m in team.members]:
        error = f"agent {name!r} handed off to {target!r}, which is not a member of the team"
    elif len(chain) >= 4 and chain[-4] == chain[-2] != chain[-3] == chain[-1]:
        error = f"handoff ping-pong between {chain[-4]} and {chain[-3]}"
    elif state.get("handoffs", 0) >= team.swarm.max_handoffs:
        error = f"swarm exceeded max_handoffs={team.swarm.max_handoffs}"
    if error:
        failed = {"output": "", "status": "failed", "error": error}
        return Command(goto=END, update={"messages": said, "shared_state": shared, **failed})
    ctx.emit(
        Handoff, name, from_agent=name, to_agent=target, reason=_reason(said, target, tool_names)
    )
    update = {
        "messages": said,
        "shared_state": shared,
        "active_agent": target,
        "handoffs": state.get("handoffs", 0) + 1,
        "bounces": chain,
    }
    return Command(goto=target, update=update)


def _bounces(chain: list[str], name: str, target: str, pure: bool) -> list[str]:
    """The turn's chain of agents that only handed off: ``name`` extends it with ``target``
    when it did nothing but hand off; any other work breaks it."""
    if not pure:
        return []
    return [*chain, target] if chain and chain[-1] == name else [name, target]


def _previous(state: SwarmState) -> str:
    """Who handed the conversation over: the last agent that spoke."""
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage) and message.name:
            return message.name
    return "a teammate"


def _new_messages(outcome: AgentOutcome, name: str) -> list[BaseMessage]:
    """What the agent added to the conversation (not its system prompt, the history it was
    given or the prompt of this turn), its replies labelled with its name."""
    labelled = [
        m.model_copy(update={"name": name}) if isinstance(m, AIMessage) and not m.name else m
        for m in outcome.added
    ]
    last = labelled[-1] if labelled else None
    answered = isinstance(last, AIMessage) and not last.tool_calls
    if outcome.output and not outcome.handoff and not answered:
        # a nested team (no transcript), or an answer made at the iteration limit
        labelled.append(AIMessage(outcome.output, name=name))
    return labelled


def _only_handed_off(said: list[BaseMessage], handoff_tools: set[str]) -> bool:
    """Whether the agent did nothing but hand off: one reply, calling handoff tools only."""
    replies = [m for m in said if isinstance(m, AIMessage)]
    if len(replies) != 1:
        return False
    return all(call["name"] in handoff_tools for call in replies[0].tool_calls)


def _reason(said: list[BaseMessage], target: str, handoff_tools: set[str]) -> str:
    wanted = handoff_tool_name(target)
    for message in reversed(said):
        for call in getattr(message, "tool_calls", None) or []:
            if call["name"] == wanted and call["name"] in handoff_tools:
                return str(call["args"].get("reason") or "")
    return ""


PATTERN = Pattern("swarm", build, supersteps=lambda team: 2 * team.swarm.max_handoffs + 50)
