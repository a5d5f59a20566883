"""The ``react`` agent: a Thought / Action / Action Input / Observation text loop, for models
without native tool calling."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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
from teamgraph.agents.toolbox import Toolbox, call_properties
from teamgraph.brief import Assignment
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec

_FINAL = re.compile(r"Final Answer\s*:\s*(.*)", re.DOTALL | re.IGNORECASE)
_ACTION = re.compile(r"Action\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_INPUT = re.compile(
    r"Action Input\s*:\s*(.*?)(?:\n\s*Observation\s*:|\Z)", re.DOTALL | re.IGNORECASE
)


@dataclass
class Action:
    tool: str
    args: dict[str, Any]


class ParseError(ValueError):
    """The model's text does not follow the ReAct format."""


def parse_react(text: str, single_arg: dict[str, str]) -> str | Action:
    """A final answer (``str``) or the next :class:`Action`; raises :class:`ParseError`.
    ``single_arg`` maps tools with one string argument to its name, so plain-text input works."""
    action = _ACTION.search(text)
    final = _FINAL.search(text)
    if final and (not action or final.start() > action.start()):
        return final.group(1).strip()
    if not action:
        raise ParseError("no 'Action:' or 'Final Answer:' line found")
    tool = action.group(1).strip().strip("`'\"")
    found = _INPUT.search(text, action.end())
    if not found:
        raise ParseError(f"'Action: {tool}' is not followed by an 'Action Input:' line")
    return Action(tool, _arguments(found.group(1).strip(), single_arg.get(tool)))


def _arguments(raw: str, single: str | None) -> dict[str, Any]:
    raw = raw.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        if single is not None:
            return {single: raw}
        raise ParseError(f"Action Input is not a JSON object: {exc}") from None
    if isinstance(value, dict):
        return value
    if single is not None:
        return {single: value if isinstance(value, str) else json.dumps(value)}
    raise ParseError("Action Input must be a JSON object of arguments")


async def run_react_agent(
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
        lambda tb: prompts.react_system(worker_system(agent), tb.describe(), tb.names),
    )
    singles = _single_string_args(toolbox)
    warned = False
    for _ in range(agent.max_iterations):
        reply = await turn.ask()
        if not reply.text.strip():
            warned = empty_reply_guard(turn, warned)
            continue
        turn.messages.append(AIMessage(reply.text))
        try:
            step = parse_react(reply.text, singles)
        except ParseError as exc:
            turn.messages.append(HumanMessage(prompts.react_format_error(str(exc))))
            continue
        if isinstance(step, str):
            return turn.finish(step)
        result, _ = await toolbox.call(
            step.tool, step.args, f"react_{turn.calls}", turn.key.tool(0)
        )
        turn.messages.append(HumanMessage(prompts.observation(result)))
        if toolbox.handoff:
            return turn.handoff(toolbox.handoff)
    return await answer_at_limit(turn, _as_is)


def _single_string_args(toolbox: Toolbox) -> dict[str, str]:
    singles = {}
    for name, tool in toolbox.tools.items():
        props = call_properties(tool)
        if len(props) == 1:
            ((arg, spec),) = props.items()
            if spec.get("type", "string") == "string":
                singles[name] = arg
    return singles


def _as_is(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages
