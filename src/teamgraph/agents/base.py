"""What every agent kind shares: the outcome, the first messages, the final-answer tail."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import BaseModel

from teamgraph import prompts
from teamgraph.agents.toolbox import Toolbox, call_properties
from teamgraph.brief import Assignment, Brief, ToolInfo
from teamgraph.durable import JournalKey
from teamgraph.errors import AgentFailed, MaxIterationsExceeded
from teamgraph.events import AgentMessage, AgentStarted
from teamgraph.llm.call import (
    Caller,
    Schema,
    StructuredOutputError,
    ask,
    ask_structured,
    schema_name,
)
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec

EMPTY_REPLY_NOTICE = "Your last reply was empty. Answer the task now, or call one of your tools."
TEXT_PROTOCOLS = ("react", "codeact")  # kinds that offer tools in the prompt, not natively


@dataclass
class AgentOutcome:
    """The agent's final answer, its structured value (with ``output_schema``), the conversation."""

    output: str
    messages: list[BaseMessage]
    structured: Any = None
    handoff: str | None = None  # the agent handed control to this agent (swarm)
    start: int = 0  # messages[start] is the task; the agent's own messages follow it
    turn: AgentTurn | None = None  # the turn that produced it (a nested team has none)

    @property
    def task(self) -> list[BaseMessage]:
        """The task message (empty for a nested team, which keeps no transcript)."""
        return self.messages[self.start : self.start + 1]

    @property
    def added(self) -> list[BaseMessage]:
        """What the agent said and heard after its task: replies, tool calls and results."""
        return self.messages[self.start + 1 :] if self.messages else []


@dataclass
class AgentExtras:
    """What a pattern adds to one agent call: earlier conversation, extra tools (handoffs)."""

    history: list[BaseMessage] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)


@dataclass
class AgentTurn:
    """One agent working one assignment: its model, messages so far and where it reports."""

    agent: AgentSpec
    ctx: RunContext
    model: BaseChatModel
    model_name: str
    messages: list[BaseMessage]
    step_id: str | None
    brief: Brief
    start: int = 0  # index of the task message

    calls: int = 0

    @property
    def scope(self) -> JournalKey:
        return JournalKey.task(self.ctx.task_scope(self.step_id or self.agent.name))

    @property
    def key(self) -> JournalKey:
        """Journal key of the latest model call."""
        return self.scope.model_call(self.calls)

    def caller(self, model: Any = None) -> Caller:
        return Caller(self.agent.name, model or self.model, self.model_name, self.step_id)

    async def ask(self, model: Any = None) -> AIMessage:
        """One model call (``model``: the agent's model bound to its tools, say). The agent is
        announced (``agent_started``) before its first call — unless that call is replayed:
        the execution that made it announced it."""
        self.calls += 1
        fresh = self._announce if self.calls == 1 else None
        caller = self.caller(model)
        return await ask(self.ctx, caller, self.messages, self.key, self.brief, fresh)

    def _announce(self) -> None:
        name = self.agent.name
        self.ctx.emit(AgentStarted, name, agent=name, step_id=self.step_id)

    async def ask_structured(self, schema: Schema, messages: list[BaseMessage]) -> Any:
        """The answer as ``schema`` (one more call if the first reply is invalid)."""
        self.calls += 1
        brief = replace(self.brief, role="structured", schema=schema_name(schema))
        return await ask_structured(self.ctx, self.caller(), messages, schema, self.key, brief)

    def handoff(self, target: str) -> AgentOutcome:
        """The agent transferred control to ``target`` (its last messages are the handoff)."""
        return AgentOutcome("", self.messages, handoff=target, start=self.start, turn=self)

    def finish(self, output: str) -> AgentOutcome:
        self.ctx.emit(
            AgentMessage,
            self.agent.name,
            agent=self.agent.name,
            content=output,
            step_id=self.step_id,
        )
        return AgentOutcome(output, self.messages, start=self.start, turn=self)


def open_turn(
    agent: AgentSpec,
    assignment: Assignment,
    ctx: RunContext,
    step_id: str | None,
    extras: AgentExtras | None,
    system: Callable[[Toolbox], str],
) -> tuple[AgentTurn, Toolbox]:
    """What every agent kind starts with: its model, its tools (plus the pattern's), and the
    first messages under the system prompt ``system(toolbox)``."""
    extras = extras or AgentExtras()
    model, model_name = ctx.models.for_agent(ctx.team, agent)
    toolbox = Toolbox([*ctx.tools_for(agent), *extras.tools], ctx, agent.name, step_id)
    messages = first_messages(assignment.text, ctx, system(toolbox), extras.history)
    brief = replace(assignment.brief, agent_kind=agent.kind, tools=_text_tools(agent, toolbox))
    turn = AgentTurn(agent, ctx, model, model_name, messages, step_id, brief, len(messages) - 1)
    return turn, toolbox


def first_messages(
    prompt: str,
    ctx: RunContext,
    system: str,
    history: list[BaseMessage] | None = None,
) -> list[BaseMessage]:
    """System prompt, earlier conversation, then the task — with the shared state prompt applied
    exactly once, to the task."""
    earlier = [m for m in history or [] if not isinstance(m, SystemMessage)]
    return [SystemMessage(system), *earlier, HumanMessage(apply_state_prompt(prompt, ctx))]


def apply_state_prompt(msg: str, ctx: RunContext) -> str:
    if ctx.team.initial_state is None:
        return msg
    state = json.dumps(ctx.shared_state, ensure_ascii=False, indent=2, default=str)
    return ctx.team.state_prompt.replace("{state}", state).replace("{msg}", msg)


def _text_tools(agent: AgentSpec, toolbox: Toolbox) -> tuple[ToolInfo, ...]:
    """The tools a text protocol offers in its prompt (native tool calling needs none here)."""
    if agent.kind not in TEXT_PROTOCOLS:
        return ()
    return tuple(
        ToolInfo(t.name, t.description, call_properties(t)) for t in toolbox.tools.values()
    )


def worker_system(agent: AgentSpec) -> str:
    return prompts.worker_system(agent.name, agent.description, agent.instructions)


def empty_reply_guard(turn: AgentTurn, already_warned: bool) -> bool:
    """Feed an empty reply back once; a second one is an error. Returns "warned now"."""
    if already_warned:
        raise AgentFailed(f"agent {turn.agent.name!r} returned an empty reply twice")
    turn.messages.append(HumanMessage(EMPTY_REPLY_NOTICE))
    return True


async def answer_at_limit(
    turn: AgentTurn, flatten: Callable[[list[BaseMessage]], list[BaseMessage]]
) -> AgentOutcome:
    """The iteration limit: fail, or (``on_max_iterations: generate``) one last call without tools
    over a history whose tool calls are written out as text, so none is left dangling."""
    agent = turn.agent
    if agent.on_max_iterations == "error":
        raise MaxIterationsExceeded(agent.name, agent.max_iterations)
    turn.messages = [*flatten(turn.messages), HumanMessage(prompts.LIMIT_REACHED)]
    reply = await turn.ask(turn.model)
    return turn.finish(reply.text)


def flatten_tool_calls(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Tool calls and results rewritten as plain text messages."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = "; ".join(f"{c['name']}({json.dumps(c['args'])})" for c in message.tool_calls)
            out.append(AIMessage(f"{message.text}\n[called tools: {calls}]".strip()))
        elif isinstance(message, ToolMessage):
            out.append(HumanMessage(f"[result of {message.name}]: {message.text}"))
        else:
            out.append(message)
    return out


AgentRunner = Callable[
    [AgentSpec, Assignment, RunContext, str | None, AgentExtras | None], Awaitable[AgentOutcome]
]


# --- function ----------------------------------------------------------------------------------
# The ``function`` agent: native tool calling; several calls in one turn run concurrently and
# their results go back in call order.
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


# --- structured: Structured output: the agent's final answer as its ``output_schema``, validated.
async def structured_answer(outcome: AgentOutcome) -> AgentOutcome:
    """Ask for the answer as ``output_schema``, through the model-call path (budget, retries,
    journal, usage); one more attempt with the validation error when the reply is invalid."""
    turn = outcome.turn
    assert turn is not None
    schema = turn.agent.output_schema
    assert schema is not None
    if isinstance(schema, dict) and "title" not in schema:  # the tool name providers require
        schema = {"title": "final_answer", "description": "The final answer.", **schema}
    messages: list[BaseMessage] = [
        *outcome.messages,
        HumanMessage(prompts.structured_request(_schema_text(schema))),
    ]
    try:
        value = await turn.ask_structured(schema, messages)
    except StructuredOutputError as exc:
        raise AgentFailed(
            f"agent {turn.agent.name!r} returned invalid structured output twice: {exc}"
        ) from None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    text = json.dumps(data, ensure_ascii=False)
    return AgentOutcome(text, outcome.messages, value, start=outcome.start, turn=turn)


def _schema_text(schema: Any) -> str:
    data = (
        schema.model_json_schema()
        if isinstance(schema, type) and issubclass(schema, BaseModel)
        else schema
    )
    return json.dumps(data, ensure_ascii=False)
