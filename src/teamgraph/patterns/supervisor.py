"""The supervisor pattern: a supervisor model delegates to members, reads what they report and
decides again, until it finishes or runs out of turns.

Each decision is structured output (:class:`SupervisorDecision`). Several picks run in parallel —
one ``worker`` task per pick (LangGraph ``Send``) — and the supervisor decides again only once all
of them have finished. The shared transcript (``messages``, kept per thread) records handoffs the
way LangGraph's supervisor library does: a ``transfer_to_<member>`` tool call answered by
"Successfully transferred to <member>", the member's answer, then "Transferring back to
supervisor".
"""

from __future__ import annotations

import json
import operator
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite, Send
from pydantic import BaseModel, Field

from teamgraph import prompts
from teamgraph.agents import AgentExtras, AgentOutcome
from teamgraph.brief import Assignment, Brief, Member
from teamgraph.durable import JournalKey
from teamgraph.errors import AgentFailed, RunStop
from teamgraph.events import AgentMessage, Handoff
from teamgraph.llm.call import Caller, StructuredOutputError, ask_structured
from teamgraph.patterns._interrupts import with_pauses
from teamgraph.patterns._members import run_member, trimmed_history
from teamgraph.patterns.contract import Pattern, RunState
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec
from teamgraph.tools.handoff import PREFIX as HANDOFF_PREFIX
from teamgraph.tools.handoff import handoff_tool_name

SUPERVISOR = prompts.SUPERVISOR_SPEAKER  # the supervisor's node, model role and transcript name
WORKER = "worker"
HANDOFF_DESTINATION = "__handoff_destination"  # metadata keys of langgraph-supervisor's messages
HANDOFF_BACK = "__is_handoff_back"


class Pick(BaseModel):
    """One member to run now, with what it should do."""

    agent: str = Field(description="Name of the member to delegate to (one of the members).")
    instructions: str = Field(description="What this member should do, self-contained.")


class SupervisorDecision(BaseModel):
    """The supervisor's next move: delegate to members (in parallel), or finish with the answer."""

    picks: list[Pick] = Field(
        default_factory=list, description="Members to run now, in parallel; empty to finish."
    )
    finish: bool = Field(default=False, description="True when the request is answered.")
    answer: str = Field(default="", description="The final answer for the user, when finishing.")
    reasoning: str = Field(default="", description="Why this decision, briefly.")


class WorkerResult(TypedDict):
    agent: str
    turn: int
    output: str
    error: str


class WorkerTask(TypedDict):
    """What one ``worker`` task gets (its ``Send``): the pick, the transcript so far and the
    thread's shared state."""

    agent: str
    instructions: str
    turn: int
    step_id: str
    history: list[BaseMessage]
    shared_state: dict[str, Any] | None


def _latest(_old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    return new  # parallel members share one live state object: any of their writes is it


class SupervisorState(RunState, total=False):
    messages: Annotated[list[AnyMessage], add_messages]  # the shared transcript of the thread
    results: Annotated[list[WorkerResult], operator.add]  # this run's worker results, in order
    turn: int  # supervisor decisions made in this run
    shared_state: Annotated[dict[str, Any] | None, _latest]  # type: ignore[misc]


def max_turns_error(max_turns: int) -> str:
    return f"supervisor did not finish within max_turns={max_turns}"


# --- nodes -----------------------------------------------------------------------------------


async def start_node(state: SupervisorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """A new run on the thread: the request joins the transcript; counters start over."""
    return {
        "messages": [HumanMessage(state["request"])],
        "results": Overwrite([]),
        "turn": 0,
        "status": "running",
        "output": "",
        "error": "",
    }


async def supervisor_node(state: SupervisorState, runtime: Runtime[RunContext]) -> Command[str]:
    """One decision: finish, or hand off to the picked members (run in parallel)."""
    ctx = runtime.context
    options = ctx.team.supervisor
    turn = state.get("turn", 0)
    transcript = list(state.get("messages", []))
    if turn >= options.max_turns:
        error = max_turns_error(options.max_turns)
        update: dict[str, Any] = {"status": "failed", "error": error, "output": last_answer(state)}
        return Command(goto=END, update=update)
    decision = await decide(ctx, transcript, turn)
    turn += 1
    if decision.finish or not decision.picks:
        answer = decision.answer.strip() or last_answer(state)
        ctx.emit(AgentMessage, SUPERVISOR, agent=SUPERVISOR, content=answer)
        update = {
            "messages": [AIMessage(answer, name=SUPERVISOR)],
            "turn": turn,
            "status": "completed",
            "output": answer,
        }
        return Command(goto=END, update=update)
    handoff, valid = handoff_messages(ctx, decision)
    if not valid:  # only unknown names: the error results tell the supervisor who exists
        return Command(goto=SUPERVISOR, update={"messages": handoff, "turn": turn})
    history = [*transcript, *handoff]
    sends = [
        Send(
            WORKER,
            WorkerTask(
                agent=pick.agent,
                instructions=pick.instructions,
                turn=turn,
                step_id=_step_id(pick.agent, turn, valid[:i]),
                history=history,
                shared_state=state.get("shared_state"),
            ),
        )
        for i, pick in enumerate(valid)
    ]
    return Command(goto=sends, update={"messages": handoff, "turn": turn})


async def worker_node(state: WorkerTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """One picked member (``state`` is its ``Send``: the pick and the transcript so far) works
    its instructions; its answer, or its error, and the handoff back join the transcript."""
    ctx = runtime.context
    agent, turn = state["agent"], state["turn"]
    shared = ctx.adopt_state(state.get("shared_state"))
    history = trimmed_history(list(state["history"]), ctx.team.history_token_budget)
    member = ctx.team.member(agent)

    async def body(local: RunContext) -> AgentOutcome:
        extras = AgentExtras(history=history)
        assignment = Assignment.of(state["instructions"])
        return await run_member(member, assignment, local, state["step_id"], extras)

    try:
        outcome = await with_pauses(ctx, body)
    except (GraphBubbleUp, RunStop):
        raise  # a pause for a human, or the run's budget: not this member's failure
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        report: list[BaseMessage] = [AIMessage(prompts.specialist_error(agent, error), name=agent)]
        result = WorkerResult(agent=agent, turn=turn, output=report[0].text, error=error)
    else:
        report = member_report(outcome, agent, ctx.team.supervisor.output_mode)
        result = WorkerResult(agent=agent, turn=turn, output=outcome.output, error="")
    ctx.emit(Handoff, agent, from_agent=agent, to_agent=SUPERVISOR, reason=result["error"])
    update = {"messages": [*report, *handoff_back_messages(agent)], "results": [result]}
    return {**update, "shared_state": shared}


# --- the decision ----------------------------------------------------------------------------


async def decide(ctx: RunContext, transcript: list[AnyMessage], turn: int) -> SupervisorDecision:
    """The supervisor model's next decision (structured output; one more attempt when invalid),
    through the model-call path: replayed from the run's journal after a crash or a pause."""
    team = ctx.team
    model, model_name = ctx.models.for_role(SUPERVISOR, team.model, team.model_kwargs)
    names = [m.name for m in team.members]
    entries = transcript_entries(transcript, names)
    messages: list[BaseMessage] = [
        SystemMessage(prompts.supervisor_system(team.name, _roster(team))),
        HumanMessage(prompts.supervisor_prompt(entries)),
    ]
    brief = Brief(
        role="supervisor",
        request=_latest_request(transcript),
        members=tuple(Member(n, d, n in _searching(team)) for n, d in _roster(team)),
        transcript=tuple(entries),
    )
    key = JournalKey.task(ctx.task_scope(SUPERVISOR)).decision(turn)
    caller = Caller(SUPERVISOR, model, model_name)
    try:
        decision: SupervisorDecision = await ask_structured(
            ctx, caller, messages, SupervisorDecision, key, brief
        )
    except StructuredOutputError as exc:
        raise AgentFailed(f"the supervisor returned an invalid decision twice: {exc}") from None
    return decision


def _latest_request(transcript: Sequence[BaseMessage]) -> str:
    """The user's latest message in the transcript."""
    for message in reversed(transcript):
        if isinstance(message, HumanMessage) and not message.name:
            return message.text
    return ""


def _searching(team: TeamSpec) -> set[str]:
    """The members with a tool to find documents."""
    return {m.name for m in team.members if m.searches}


def _roster(team: TeamSpec) -> list[tuple[str, str]]:
    """Members and what they do (a nested team without a description: its members)."""
    return [
        (m.name, m.description or "a team of " + ", ".join(sub.name for sub in m.members))
        if isinstance(m, TeamSpec)
        else (m.name, m.description)
        for m in team.members
    ]


# --- the transcript --------------------------------------------------------------------------


def handoff_messages(
    ctx: RunContext, decision: SupervisorDecision
) -> tuple[list[BaseMessage], list[Pick]]:
    """The supervisor's ``transfer_to_<member>`` calls and their results, and the valid picks.
    A name that is no member gets an error result naming the members."""
    names = [m.name for m in ctx.team.members]
    calls, results, valid = [], [], []
    for pick in decision.picks:
        name, call_id = handoff_tool_name(pick.agent), f"call_{uuid.uuid4().hex[:12]}"
        calls.append(tool_call(name=name, args={"instructions": pick.instructions}, id=call_id))
        if pick.agent not in names:
            error = prompts.unknown_member(pick.agent, names)
            results.append(ToolMessage(error, name=name, tool_call_id=call_id, status="error"))
            continue
        results.append(
            ToolMessage(
                f"Successfully transferred to {pick.agent}",
                name=name,
                tool_call_id=call_id,
                response_metadata={HANDOFF_DESTINATION: pick.agent},
            )
        )
        valid.append(pick)
        ctx.emit(
            Handoff,
            pick.agent,
            from_agent=SUPERVISOR,
            to_agent=pick.agent,
            reason=pick.instructions,
        )
    transfer = AIMessage(decision.reasoning, name=SUPERVISOR, tool_calls=calls)
    return [transfer, *results], valid


def handoff_back_messages(agent: str) -> list[BaseMessage]:
    """The pair a member's turn ends with: "Transferring back to supervisor" and its result."""
    name, call_id = f"transfer_back_to_{SUPERVISOR}", str(uuid.uuid4())
    meta = {HANDOFF_BACK: True}
    return [
        AIMessage(
            f"Transferring back to {SUPERVISOR}",
            name=agent,
            tool_calls=[tool_call(name=name, args={}, id=call_id)],
            response_metadata=meta,
        ),
        ToolMessage(
            f"Successfully transferred back to {SUPERVISOR}",
            name=name,
            tool_call_id=call_id,
            response_metadata=meta,
        ),
    ]


def member_report(
    outcome: AgentOutcome, agent: str, mode: Literal["last_message", "full_history"]
) -> list[BaseMessage]:
    """What a member adds to the transcript: its final answer (``last_message``), or its whole
    conversation without the system prompt and the transcript it was given (``full_history``)."""
    final = AIMessage(outcome.output, name=agent)
    own = [*outcome.task, *outcome.added] if mode == "full_history" else []
    report: list[BaseMessage] = []
    for message in own:
        if isinstance(message, AIMessage):
            report.append(message.model_copy(update={"id": None, "name": agent}))
        elif isinstance(message, HumanMessage):  # the task: the supervisor's words
            report.append(message.model_copy(update={"id": None, "name": SUPERVISOR}))
        else:
            report.append(message.model_copy(update={"id": None}))
    last = report[-1] if report else None
    if not (isinstance(last, AIMessage) and not last.tool_calls and last.text == outcome.output):
        report.append(final)
    return report


def transcript_entries(
    messages: Sequence[BaseMessage], members: Sequence[str]
) -> list[tuple[str, str]]:
    """The transcript as ``(speaker, text)`` pairs for the supervisor's prompt: handoff
    bookkeeping left out, delegations as ``supervisor → member`` with their instructions."""
    by_tool = {handoff_tool_name(name): name for name in members}
    entries: list[tuple[str, str]] = []
    for message in messages:
        text = message.text.strip()
        if isinstance(message, HumanMessage):
            entries.append((message.name or prompts.USER_SPEAKER, text))
        elif isinstance(message, AIMessage):
            if message.response_metadata.get(HANDOFF_BACK):
                continue
            speaker = message.name or "assistant"
            transfers = [c for c in message.tool_calls if c["name"].startswith(HANDOFF_PREFIX)]
            other = [c for c in message.tool_calls if c not in transfers]
            calls = "".join(
                f"\n[called {c['name']}({json.dumps(c['args'], ensure_ascii=False)})]"
                for c in other
            )
            if text or calls:
                entries.append((speaker, (text + calls).strip()))
            for call in transfers:
                target = by_tool.get(call["name"], call["name"].removeprefix(HANDOFF_PREFIX))
                instructions = str(call["args"].get("instructions", ""))
                entries.append((prompts.delegation_speaker(target), instructions))
        elif isinstance(message, ToolMessage):
            if message.status == "error":
                entries.append(("error", text))
            elif not (
                message.response_metadata.get(HANDOFF_DESTINATION)
                or message.response_metadata.get(HANDOFF_BACK)
            ):
                entries.append((f"{message.name or 'tool'} result", text))
    return entries


def last_answer(state: SupervisorState) -> str:
    """The latest member answer of this run (an error report only if nothing else came back)."""
    results = state.get("results", [])
    answered = [r for r in results if not r["error"]]
    chosen = answered[-1] if answered else (results[-1] if results else None)
    return chosen["output"] if chosen else ""


def _step_id(agent: str, turn: int, earlier: Sequence[Pick]) -> str:
    """``<agent>-<turn>``; a member picked twice in one decision gets a suffix the second time."""
    repeat = sum(1 for p in earlier if p.agent == agent)
    return f"{agent}-{turn}" + (f".{repeat + 1}" if repeat else "")


def build(
    team: TeamSpec, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[SupervisorState, RunContext, SupervisorState, SupervisorState]:
    """The compiled supervisor graph for ``team``."""
    graph = StateGraph(SupervisorState, context_schema=RunContext)
    graph.add_node("start", start_node)
    graph.add_node(SUPERVISOR, supervisor_node, destinations=(WORKER, SUPERVISOR, END))
    graph.add_node(WORKER, worker_node)
    graph.add_edge(START, "start")
    graph.add_edge("start", SUPERVISOR)
    graph.add_edge(WORKER, SUPERVISOR)
    return graph.compile(checkpointer=checkpointer, name=team.name)


PATTERN = Pattern("supervisor", build, supersteps=lambda team: 2 * team.supervisor.max_turns + 50)
