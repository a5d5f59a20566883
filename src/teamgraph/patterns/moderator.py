"""The clarification gate (the seeds' "moderator"): before a team with ``clarify: true`` starts,
a vague request pauses the run with a question; the user's answer joins the request."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from teamgraph import prompts
from teamgraph.events import AgentMessage
from teamgraph.patterns._interrupts import ask_user
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec


class ClarityVerdict(BaseModel):
    """Whether the request needs a clarifying question before the team starts."""

    needs_clarification: bool = Field(description="True if the request is too vague to act on.")
    question: str = Field(default="", description="The one question to ask the user.")


async def clarifying_question(request: str, ctx: RunContext) -> str:
    """The question to ask, or ``""`` when the request is clear enough."""
    team = ctx.team
    model, name = ctx.models.for_role("moderator", team.model, team.model_kwargs)
    ctx.usage.admit()
    runnable = model.with_structured_output(ClarityVerdict, include_raw=True)
    members = [(m.name, m.description) for m in team.members]
    system = prompts.moderator_system(team.name, members)
    raw = await runnable.ainvoke([SystemMessage(system), HumanMessage(request)])
    assert isinstance(raw, dict)
    if isinstance(raw.get("raw"), AIMessage):
        ctx.usage.record("moderator", None, name, raw["raw"])
    verdict = raw.get("parsed")
    if not isinstance(verdict, ClarityVerdict) or not verdict.needs_clarification:
        return ""
    return verdict.question or "Could you say more about what you need?"


async def moderate(state: Any, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    question = await clarifying_question(state["request"], ctx)
    if not question:
        return {}
    ctx.emit(AgentMessage, "moderator", agent="moderator", content=question)
    answer = ask_user(question)
    return {"request": f"{state['request']}\n\nClarification from the user: {answer}"}


def gate(
    team: TeamSpec,
    inner: CompiledStateGraph[Any, Any, Any, Any],
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``moderator → <the team's graph>``, over the team graph's own state."""
    graph = StateGraph(inner.builder.state_schema, context_schema=RunContext)
    graph.add_node("moderator", moderate)
    graph.add_node("team", inner)
    graph.add_edge(START, "moderator")
    graph.add_edge("moderator", "team")
    graph.add_edge("team", END)
    return graph.compile(checkpointer=checkpointer, name=f"{team.name}-gate")
