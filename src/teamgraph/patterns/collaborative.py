"""The collaborative pattern: plan → research → write → review, on one shared state.

Four roles — planner, researcher, writer, reviewer — are members named so, or the members
``collaborative.<role>`` names. Each works from the request and what the others wrote so far
(``plan_text``, ``research``, ``draft``, ``feedback``). The reviewer returns a structured
:class:`ReviewVerdict`; a rejection sends its feedback back through research and writing, up to
``collaborative.max_iterations`` write/review rounds. The output is the last draft: approved, or
— when the rounds run out — the best the team got, with a note in ``error`` (status stays
``completed``).

The outline lives in ``plan_text`` (``plan`` is the workflow pattern's plan).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field

from teamgraph import prompts
from teamgraph.agents import AgentOutcome
from teamgraph.brief import Assignment
from teamgraph.errors import AgentFailed, SpecError
from teamgraph.events import Handoff
from teamgraph.patterns._interrupts import with_pauses
from teamgraph.patterns._members import run_member
from teamgraph.patterns.contract import Pattern, RunState
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec

ROLES = ("planner", "researcher", "writer", "reviewer")


class ReviewVerdict(BaseModel):
    """The reviewer's decision on a draft (offline, its name is ``prompts.REVIEW_VERDICT_TOOL``)."""

    approved: bool = Field(description="True if the draft is good enough to give to the user.")
    feedback: str = Field(
        default="", description="What to change (required when not approved); empty if approved."
    )


class CollaborativeState(RunState, total=False):
    plan_text: str
    research: str
    draft: str
    feedback: str
    iteration: int  # the write/review round in progress, from 1
    verdicts: list[dict[str, Any]]  # {"iteration", "approved", "feedback"} per review


def roles(team: TeamSpec) -> dict[str, AgentSpec | TeamSpec]:
    """Who plays each role; :class:`SpecError` names a missing role and the members."""
    names = [m.name for m in team.members]
    cast: dict[str, AgentSpec | TeamSpec] = {}
    for role in ROLES:
        name = getattr(team.collaborative, role) or (role if role in names else None)
        if name is None:
            raise SpecError(
                f"team {team.name!r}: no member plays the collaborative {role} role; name a "
                f"member {role!r} or set collaborative.{role} to one of the members: "
                f"{', '.join(names)}"
            )
        cast[role] = team.member(name)
    if not isinstance(cast["reviewer"], AgentSpec):
        raise SpecError(
            f"team {team.name!r}: the collaborative reviewer {cast['reviewer'].name!r} must be an "
            "agent (it returns a structured verdict), not a nested team"
        )
    return cast


async def _run(
    ctx: RunContext,
    state: CollaborativeState,
    member: AgentSpec | TeamSpec,
    assignment: Assignment,
) -> AgentOutcome:
    """``member`` works ``assignment`` on the thread's shared state (pausing for approvals)."""
    ctx.adopt_state(state.get("shared_state"))
    return await with_pauses(ctx, lambda local: run_member(member, assignment, local))


def _hand(ctx: RunContext, cast: dict[str, Any], frm: str, to: str, reason: str) -> None:
    """A Handoff event from role ``frm`` to role ``to`` (none when one member plays both)."""
    source, target = cast[frm].name, cast[to].name
    if source != target:
        ctx.emit(Handoff, source, from_agent=source, to_agent=target, reason=reason)


async def planner_node(
    state: CollaborativeState, runtime: Runtime[RunContext]
) -> CollaborativeState:
    """A new turn: the plan; the previous turn's research, drafts and verdicts are cleared."""
    ctx = runtime.context
    cast = roles(ctx.team)
    outcome = await _run(ctx, state, cast["planner"], prompts.collab_plan(state["request"]))
    _hand(ctx, cast, "planner", "researcher", "plan ready")
    return {
        "shared_state": ctx.shared_state,
        "plan_text": outcome.output,
        "research": "",
        "draft": "",
        "feedback": "",
        "iteration": 1,
        "verdicts": [],
        "output": "",
        "status": "running",
        "error": "",
    }


async def researcher_node(
    state: CollaborativeState, runtime: Runtime[RunContext]
) -> CollaborativeState:
    ctx = runtime.context
    cast = roles(ctx.team)
    assignment = prompts.collab_research(
        state["request"], state.get("plan_text", ""), state.get("feedback", "")
    )
    outcome = await _run(ctx, state, cast["researcher"], assignment)
    _hand(ctx, cast, "researcher", "writer", "research ready")
    return {"research": outcome.output, "shared_state": ctx.shared_state}


async def writer_node(
    state: CollaborativeState, runtime: Runtime[RunContext]
) -> CollaborativeState:
    ctx = runtime.context
    cast = roles(ctx.team)
    assignment = prompts.collab_write(
        state["request"],
        state.get("plan_text", ""),
        state.get("research", ""),
        state.get("draft", ""),
        state.get("feedback", ""),
    )
    outcome = await _run(ctx, state, cast["writer"], assignment)
    _hand(ctx, cast, "writer", "reviewer", f"draft {state.get('iteration', 1)} ready for review")
    return {"draft": outcome.output, "shared_state": ctx.shared_state}


async def reviewer_node(state: CollaborativeState, runtime: Runtime[RunContext]) -> Command[str]:
    """Approve (done), or send the feedback back to research and writing — until the rounds
    run out."""
    ctx = runtime.context
    cast = roles(ctx.team)
    reviewer = cast["reviewer"]
    assert isinstance(reviewer, AgentSpec)
    judge = reviewer.model_copy(update={"output_schema": ReviewVerdict})
    draft, iteration = state.get("draft", ""), state.get("iteration", 1)
    assignment = prompts.collab_review(state["request"], state.get("research", ""), draft)
    verdict = _verdict(await _run(ctx, state, judge, assignment), reviewer.name)
    verdicts = [*state.get("verdicts", []), {"iteration": iteration, **verdict.model_dump()}]
    reviewed = {
        "verdicts": verdicts,
        "feedback": verdict.feedback,
        "shared_state": ctx.shared_state,
    }
    done: dict[str, Any] = {**reviewed, "output": draft}
    if verdict.approved:
        return Command(goto=END, update={**done, "status": "completed"})
    limit = ctx.team.collaborative.max_iterations
    if iteration >= limit:
        note = f"reviewer did not approve within max_iterations={limit}"
        return Command(goto=END, update={**done, "status": "completed", "error": note})
    _hand(ctx, cast, "reviewer", "researcher", f"revise: {verdict.feedback}".strip())
    return Command(goto="researcher", update={**reviewed, "iteration": iteration + 1})


def _verdict(outcome: AgentOutcome, reviewer: str) -> ReviewVerdict:
    value = outcome.structured
    if isinstance(value, ReviewVerdict):
        return value
    if isinstance(value, dict):
        return ReviewVerdict.model_validate(value)
    raise AgentFailed(f"reviewer {reviewer!r} returned no verdict")


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[CollaborativeState, RunContext, CollaborativeState, CollaborativeState]:
    """The compiled collaborative graph for ``team``."""
    roles(team)  # a missing role fails here, before any run
    graph = StateGraph(CollaborativeState, context_schema=RunContext)
    graph.add_node("planner", planner_node)
    graph.add_node("researcher", researcher_node)
    graph.add_node("writer", writer_node)
    graph.add_node("reviewer", reviewer_node, destinations=("researcher", END))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "researcher")
    graph.add_edge("researcher", "writer")
    graph.add_edge("writer", "reviewer")
    return graph.compile(checkpointer=checkpointer, name=team.name)


PATTERN = Pattern(
    "collaborative", build, supersteps=lambda team: 4 * team.collaborative.max_iterations + 50
)
