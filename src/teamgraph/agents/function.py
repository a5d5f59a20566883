"""The ``function`` agent: native tool calling, several tool calls per turn run concurrently."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool

from teamgraph import prompts
from teamgraph.agents._model_call import call_model
from teamgraph.errors import MaxIterationsExceeded
from teamgraph.events import AgentMessage, AgentStarted, ToolCalled, ToolReturned
from teamgraph.run_context import RunContext
from teamgraph.specs.agent import AgentSpec


@dataclass
class AgentOutcome:
    """The agent's final answer and the conversation that led to it."""

    output: str
    messages: list[BaseMessage]


async def run_function_agent(
    agent: AgentSpec, prompt: str, ctx: RunContext, *, step_id: str | None = None
) -> AgentOutcome:
    """Call the model; run the tools it asks for; repeat until it answers or hits the limit."""
    model, model_name = ctx.models.for_agent(ctx.team, agent)
    tools = ctx.tools_for(agent)
    bound = model.bind_tools(tools) if tools else model
    messages: list[BaseMessage] = [
        SystemMessage(prompts.worker_system(agent.name, agent.description, agent.instructions)),
        HumanMessage(prompt),
    ]
    ctx.emit(AgentStarted, agent.name, agent=agent.name, step_id=step_id)
    by_name = {t.name: t for t in tools}
    for _ in range(agent.max_iterations):
        reply = await call_model(
            bound, messages, ctx, agent=agent.name, model_name=model_name, step_id=step_id
        )
        messages.append(reply)
        if not reply.tool_calls:
            output = reply.text
            ctx.emit(AgentMessage, agent.name, agent=agent.name, content=output, step_id=step_id)
            return AgentOutcome(output, messages)
        results = await asyncio.gather(
            *(_run_tool(call, by_name, ctx, agent.name, step_id) for call in reply.tool_calls)
        )
        messages.extend(results)
    raise MaxIterationsExceeded(agent.name, agent.max_iterations)


async def _run_tool(
    call: ToolCall, tools: dict[str, BaseTool], ctx: RunContext, agent: str, step_id: str | None
) -> ToolMessage:
    name, call_id = call["name"], call.get("id") or ""
    ctx.emit(
        ToolCalled,
        agent,
        name,
        agent=agent,
        tool=name,
        call_id=call_id,
        args=call["args"],
        step_id=step_id,
    )
    content, is_error = await _invoke(tools, name, call["args"])
    ctx.emit(
        ToolReturned,
        agent,
        name,
        agent=agent,
        tool=name,
        call_id=call_id,
        output=content,
        is_error=is_error,
        step_id=step_id,
    )
    return ToolMessage(
        content=content, tool_call_id=call_id, name=name, status="error" if is_error else "success"
    )


async def _invoke(tools: dict[str, BaseTool], name: str, args: dict[str, Any]) -> tuple[str, bool]:
    tool = tools.get(name)
    if tool is None:
        return f"Tool {name} not found. Available: {', '.join(sorted(tools)) or 'none'}", True
    try:
        result = await tool.ainvoke(args)
    except Exception as exc:  # a tool's failure is the agent's information, not a crash
        return f"Error: {type(exc).__name__}: {exc}", True
    return _as_text(result), False


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, AIMessage | ToolMessage):
        return str(result.content)
    try:
        return json.dumps(result, default=str)
    except TypeError:
        return str(result)
