"""Handoff tools: ``transfer_to_<agent>`` hands the conversation to another agent.

A handoff tool returns ``Command(goto=<agent>, graph=Command.PARENT, update=...)``. teamgraph's
:class:`~teamgraph.agents.toolbox.Toolbox` recognises any ``Command`` whose ``goto`` is a name:
the tool result reads "Successfully transferred to <agent>" and the agent's turn ends with
``handoff=<agent>``. The swarm pattern then routes the conversation; an agent can only reach the
agents it was given tools for, so an invalid target never reaches the graph.

The same tool also works inside LangGraph's prebuilt agents (``create_react_agent``,
``langchain.agents.create_agent``) running as nodes of a parent graph: ``ToolNode`` injects the
agent's state and the tool call id, and the ``Command`` goes to the parent graph with the
conversation plus the tool's answer in ``messages`` and the new ``active_agent``, the update
``langgraph-swarm`` makes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from pydantic import BaseModel, Field

PREFIX = "transfer_to_"
MAX_NAME = 64  # the longest tool name providers accept (OpenAI: ^[a-zA-Z0-9_-]{1,64}$)
TARGET_KEY = "handoff_to"  # tool metadata: the agent the tool transfers to
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


class HandoffInput(BaseModel):
    """Arguments of a handoff tool (``agent_state`` is injected by LangGraph's ``ToolNode``)."""

    reason: str = Field(
        default="", description="Optional: one sentence on why the other agent should take over."
    )
    agent_state: Annotated[dict[str, Any] | None, InjectedState] = None


def handoff_tool_name(target: str) -> str:
    """``transfer_to_<target>``: lower case, anything but ``[a-z0-9_-]`` as ``_``, at most 64
    characters."""
    slug = _UNSAFE.sub("_", target.strip().lower()).strip("_") or "agent"
    return f"{PREFIX}{slug}"[:MAX_NAME]


def transferred(target: str) -> str:
    """What the agent reads after handing off (the Toolbox words it the same way)."""
    return f"Successfully transferred to {target}"


class HandoffTool(StructuredTool):
    """A :class:`StructuredTool` that also learns its tool call id when invoked with a full
    ``ToolCall`` (as LangGraph's ``ToolNode`` does), to answer the call in ``messages``."""

    target: str

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._answer(super().invoke(input, config, **kwargs), input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._answer(await super().ainvoke(input, config, **kwargs), input)

    def _answer(self, result: Any, call: Any) -> Any:
        if not (isinstance(call, dict) and call.get("type") == "tool_call" and call.get("id")):
            return result  # plain arguments (teamgraph's Toolbox): nothing to answer
        if not isinstance(result, Command) or not isinstance(result.update, dict):
            return result
        answer = ToolMessage(transferred(self.target), tool_call_id=call["id"], name=self.name)
        state = (call.get("args") or {}).get("agent_state") or {}
        history = list(state.get("messages", [])) if isinstance(state, dict) else []
        update = {**result.update, "messages": [*history, answer]}
        return Command(goto=result.goto, graph=result.graph, update=update)


def make_handoff_tool(target: str, description: str = "") -> BaseTool:
    """The tool an agent calls to transfer the conversation to ``target``; ``description`` is
    the target's own description, so the model knows whom it hands over to."""

    def command(reason: str = "", agent_state: dict[str, Any] | None = None) -> Command[Any]:
        return Command(goto=target, graph=Command.PARENT, update={"active_agent": target})

    async def acommand(reason: str = "", agent_state: dict[str, Any] | None = None) -> Command[Any]:
        return command(reason, agent_state)

    about = description.strip().rstrip(".")
    text = f"Transfer the conversation to {target}" + (f": {about}." if about else ".")
    return HandoffTool(
        name=handoff_tool_name(target),
        description=text,
        args_schema=HandoffInput,
        func=command,
        coroutine=acommand,
        target=target,
        metadata={TARGET_KEY: target},
    )


def handoff_target(tool: BaseTool) -> str | None:
    """The agent ``tool`` transfers to, when it is a handoff tool."""
    target = (tool.metadata or {}).get(TARGET_KEY)
    return target if isinstance(target, str) else None
