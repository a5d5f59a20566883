"""Agent kinds: ``function`` (native tool calling), ``react`` (text protocol), ``codeact``
(Python in a sandbox). All share instructions, tools, limits, structured output and shared state."""

from __future__ import annotations

from teamgraph.agents.base import (
    AgentExtras,
    AgentOutcome,
    AgentRunner,
    run_function_agent,
    structured_answer,
)
from teamgraph.agents.codeact import run_codeact_agent
from teamgraph.agents.react import run_react_agent
from teamgraph.brief import Assignment
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec

RUNNERS: dict[str, AgentRunner] = {
    "function": run_function_agent,
    "react": run_react_agent,
    "codeact": run_codeact_agent,
}


async def run_agent(
    agent: AgentSpec,
    assignment: Assignment,
    ctx: RunContext,
    step_id: str | None = None,
    extras: AgentExtras | None = None,
) -> AgentOutcome:
    """Run ``agent`` on ``assignment`` with the loop of its kind, then shape its structured
    output. ``extras`` carries the conversation so far and pattern tools (handoffs)."""
    outcome = await RUNNERS[agent.kind](agent, assignment, ctx, step_id, extras)
    if agent.output_schema is None or outcome.handoff:
        return outcome
    return await structured_answer(outcome)


__all__ = ["RUNNERS", "AgentExtras", "AgentOutcome", "run_agent"]
