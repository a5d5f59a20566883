"""The ``codeact`` agent: the model writes Python, which runs in the sandbox with the agent's tools
available as functions; the output goes back to the model until it answers in plain text."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from teamgraph import prompts
from teamgraph.agents.base import (
    AgentExtras,
    AgentOutcome,
    answer_at_limit,
    empty_reply_guard,
    open_turn,
    worker_system,
)
from teamgraph.agents.toolbox import Toolbox
from teamgraph.brief import Assignment
from teamgraph.durable import JournalKey, ToolEntry, once
from teamgraph.errors import SandboxUnavailable
from teamgraph.events import ToolCalled, ToolReturned
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str | None:
    """The Python in the reply's code blocks (joined), or ``None`` for a plain-text answer."""
    blocks = [b.strip() for b in _CODE.findall(text) if b.strip()]
    return "\n\n".join(blocks) if blocks else None


async def run_codeact_agent(
    agent: AgentSpec,
    assignment: Assignment,
    ctx: RunContext,
    step_id: str | None = None,
    extras: AgentExtras | None = None,
) -> AgentOutcome:
    turn, toolbox = open_turn(
        agent,
        assignment,
        ctx,
        step_id,
        extras,
        lambda tb: prompts.codeact_system(worker_system(agent), tb.describe()),
    )
    warned = False
    for iteration in range(agent.max_iterations):
        reply = await turn.ask()
        if not reply.text.strip():
            warned = empty_reply_guard(turn, warned)
            continue
        turn.messages.append(AIMessage(reply.text))
        code = extract_code(reply.text)
        if code is None:
            return turn.finish(reply.text)
        result = await execute(code, toolbox, f"code_{iteration + 1}", turn.key)
        turn.messages.append(HumanMessage(prompts.code_result(result)))
    return await answer_at_limit(turn, _as_is)


async def execute(code: str, toolbox: Toolbox, call_id: str, key: JournalKey) -> str:
    """Run ``code`` in the run's sandbox, exactly once (:func:`~teamgraph.durable.once`): a
    replay returns the recorded result and is not announced again. Refusals and failures come
    back as text.

    The tools the code calls are side effects of their own, each made exactly once under its
    own key. A call that must wait for a human (an approval) stops the code where it is and
    pauses the step before the run's result is recorded; on resume the code runs again from
    the start, its earlier tool calls answered from the journal, and the approved call runs
    (once) and hands the code its result."""
    ctx, agent, step_id = toolbox.ctx, toolbox.agent, toolbox.step_id
    common = {"agent": agent, "tool": "python", "call_id": call_id, "step_id": step_id}
    entry = await once(
        ctx.journal,
        key.code(),
        ToolEntry,
        partial(_run_code, code, toolbox, key),
        crash="tool",
        announce=lambda: ctx.emit(ToolCalled, agent, "python", args={"code": code}, **common),
        settle=lambda done: ctx.emit(
            ToolReturned, agent, "python", output=done.content, is_error=done.is_error, **common
        ),
    )
    return entry.content


async def _run_code(code: str, toolbox: Toolbox, key: JournalKey) -> ToolEntry:
    from teamgraph.sandbox import Sandbox

    ctx = toolbox.ctx
    if ctx.sandbox is None:
        ctx.sandbox = Sandbox()
    functions = {name: _bridge(toolbox, name, key) for name in toolbox.names}
    try:
        result = await ctx.sandbox.run(code, functions)
    except SandboxUnavailable as exc:
        return ToolEntry(f"code execution refused: {exc}", True)
    return ToolEntry(str(result.to_text()))


def _bridge(toolbox: Toolbox, name: str, key: JournalKey) -> Callable[..., Awaitable[Any]]:
    """A tool as the sandbox calls it: its result (JSON decoded when it is JSON), or an
    exception carrying the error."""
    counter = 0

    async def call(**kwargs: Any) -> Any:
        nonlocal counter
        counter += 1
        text, is_error = await toolbox.call(
            name, kwargs, f"{name}_{counter}", key.code_tool(name, counter)
        )
        if is_error:
            raise RuntimeError(text)
        try:  # numbers, lists and objects come back as Python values
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    return call


def _as_is(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages
