"""What every agent kind shares: the outcome, the first messages, the final-answer tail."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from teamgraph import prompts
from teamgraph.agents._model_call import call_model
from teamgraph.agents.toolbox import Toolbox
from teamgraph.errors import AgentFailed, MaxIterationsExceeded
from teamgraph.events import AgentMessage
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec

EMPTY_REPLY_NOTICE = "Your last reply was empty. Answer the task now, or call one of your tools."


@dataclass
class AgentOutcome:
    """The agent's final answer, its structured value (with ``output_schema``), the conversation."""

    output: str
    messages: list[BaseMessage]
    structured: Any = None
    handoff: str | None = None  # the agent handed control to this agent (swarm)


@dataclass
class AgentExtras:
    """What a pattern adds to one agent call: earlier conversation, extra tools (handoffs)."""

    history: list[BaseMessage] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)


@dataclass
class AgentTurn:
    """One agent working one prompt: its model, messages so far and where it reports."""

    agent: AgentSpec
    ctx: RunContext
    model: BaseChatModel
    model_name: str
    messages: list[BaseMessage]
    step_id: str | None

    calls: int = 0

    @property
    def key(self) -> str:
        """Journal key of the latest model call."""
        return f"{self.ctx.task_scope(self.step_id or self.agent.name)}/m{self.calls}"

    async def ask(self, model: Any = None) -> AIMessage:
        """One model call — replayed from the journal if an earlier attempt made it already."""
        self.calls += 1
        key = self.key
        saved = await self.ctx.ledger.recall(key)
        if saved is not None:
            restored = messages_from_dict([json.loads(saved)])[0]
            assert isinstance(restored, AIMessage)
            return restored
        reply = await call_model(
            model or self.model,
            self.messages,
            self.ctx,
            agent=self.agent.name,
            model_name=self.model_name,
            step_id=self.step_id,
        )
        await self.ctx.ledger.record(key, json.dumps(message_to_dict(reply)))
        return reply

    def handoff(self, target: str) -> AgentOutcome:
        """The agent transferred control to ``target`` (its last messages are the handoff)."""
        return AgentOutcome("", self.messages, handoff=target)

    def finish(self, output: str) -> AgentOutcome:
        self.ctx.emit(
            AgentMessage,
            self.agent.name,
            agent=self.agent.name,
            content=output,
            step_id=self.step_id,
        )
        return AgentOutcome(output, self.messages)


def open_turn(
    agent: AgentSpec,
    prompt: str,
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
    messages = first_messages(agent, prompt, ctx, system(toolbox), extras.history)
    return AgentTurn(agent, ctx, model, model_name, messages, step_id), toolbox


def first_messages(
    agent: AgentSpec,
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


AgentRunner = Callable[[AgentSpec, str, RunContext, str | None], Awaitable[AgentOutcome]]
