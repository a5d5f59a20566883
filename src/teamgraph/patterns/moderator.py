"""The clarification gate (the seeds' "moderator"): before a team with ``clarify: true`` starts,
a vague request pauses the run with a question; the user's answer joins the request."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from teamgraph import prompts
from teamgraph.brief import Brief, Member
from teamgraph.durable import JournalKey
from teamgraph.events import AgentMessage
from teamgraph.llm.call import Caller, StructuredOutputError, ask_structured
from teamgraph.patterns._interrupts import ask_user
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec
from teamgraph.text import clarified

MODERATOR = "moderator"  # the gate's node, model role and speaker


class ClarityVerdict(BaseModel):
    """Whether the request needs a clarifying question before the team starts."""

    needs_clarification: bool = Field(description="True if the request is too vague to act on.")
    question: str = Field(default="", description="The one question to ask the user.")


async def clarifying_question(request: str, ctx: RunContext) -> str:
    """The question to ask, or ``""`` when the request is clear enough (a verdict the model
    cannot give in valid form counts as clear: the team starts)."""
    team = ctx.team
    model, name = ctx.models.for_role(MODERATOR, team.model, team.model_kwargs)
    members = [(m.name, m.description) for m in team.members]
    messages = [SystemMessage(prompts.moderator_system(team.name, members)), HumanMessage(request)]
    brief = Brief(role="moderator", request=request, members=_members(team))
    key = JournalKey.task(ctx.task_scope(MODERATOR)).model_call(1)
    try:
        verdict = await ask_structured(
            ctx, Caller(MODERATOR, model, name), messages, ClarityVerdict, key, brief
        )
    except StructuredOutputError:
        return ""
    if not verdict.needs_clarification:
        return ""
    return str(verdict.question) or "Could you say more about what you need?"


def _members(team: TeamSpec) -> tuple[Member, ...]:
    return tuple(Member(m.name, m.description) for m in team.members)


async def moderate(state: Any, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    question = await clarifying_question(state["request"], ctx)
    if not question:
        return {}
    ctx.emit(AgentMessage, MODERATOR, agent=MODERATOR, content=question)
    answer = ask_user(question)
    return {"request": clarified(state["request"], answer)}


def behind_clarification(
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
