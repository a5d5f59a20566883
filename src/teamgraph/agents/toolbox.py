"""Running an agent's tool calls: events, unknown tools, failures, approvals, shared state.

Whatever goes wrong becomes an error result the agent sees — never an exception that ends the step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from teamgraph.events import ToolCalled, ToolReturned
from teamgraph.run_context import RunContext

STATE_ARG = "state"


class Toolbox:
    """The tools one agent may call, bound to the run and step it works in."""

    def __init__(
        self, tools: Sequence[BaseTool], ctx: RunContext, agent: str, step_id: str | None
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.ctx, self.agent, self.step_id = ctx, agent, step_id

    @property
    def names(self) -> list[str]:
        return sorted(self.tools)

    def describe(self) -> str:
        """One line per tool — name, arguments (JSON Schema) and description — for text prompts."""
        lines = []
        for tool in self.tools.values():
            args = json.dumps(call_properties(tool))
            lines.append(f"- {tool.name}: {tool.description} Arguments: {args}")
        return "\n".join(lines) or "- (no tools)"

    async def call(self, name: str, args: dict[str, Any], call_id: str) -> tuple[str, bool]:
        """Run one call; returns ``(text, is_error)`` and emits tool_called / tool_returned."""
        self.ctx.emit(
            ToolCalled,
            self.agent,
            name,
            agent=self.agent,
            tool=name,
            call_id=call_id,
            args=args,
            step_id=self.step_id,
        )
        content, is_error = await self._invoke(name, args)
        self.ctx.emit(
            ToolReturned,
            self.agent,
            name,
            agent=self.agent,
            tool=name,
            call_id=call_id,
            output=content,
            is_error=is_error,
            step_id=self.step_id,
        )
        return content, is_error

    async def call_message(self, call: ToolCall) -> ToolMessage:
        content, is_error = await self.call(call["name"], call["args"], call.get("id") or "")
        return ToolMessage(
            content=content,
            tool_call_id=call.get("id") or "",
            name=call["name"],
            status="error" if is_error else "success",
        )

    async def _invoke(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        tool = self.tools.get(name)
        if tool is None:
            return f"Tool {name} not found. Available: {', '.join(self.names) or 'none'}", True
        if self._sensitive(tool) and self.ctx.approver is None:
            return (
                f"Tool {name} requires approval, and no approver is available in this run; "
                "the call was not executed.",
                True,
            )
        try:
            result = await tool.ainvoke(self._with_state(tool, args))
        except Exception as exc:  # a tool's failure is the agent's information, not a crash
            return f"Error: {type(exc).__name__}: {exc}", True
        return as_text(result), False

    def _sensitive(self, tool: BaseTool) -> bool:
        flagged = bool((tool.metadata or {}).get("requires_approval"))
        return self.ctx.team.approvals.requires_approval(tool.name, flagged)

    def _with_state(self, tool: BaseTool, args: dict[str, Any]) -> dict[str, Any]:
        """Tools with a hidden ``state`` argument (``InjectedToolArg``) get the live shared
        state; what they change in it persists for later steps and turns."""
        schema = tool.get_input_schema()
        accepted = schema.model_json_schema() if issubclass(schema, BaseModel) else {}
        if STATE_ARG in accepted.get("properties", {}) and STATE_ARG not in call_properties(tool):
            return {**args, STATE_ARG: self.ctx.shared_state}
        return args


def call_properties(tool: BaseTool) -> dict[str, Any]:
    """The arguments a model may pass to ``tool`` (injected ones excluded), as JSON Schema."""
    props: dict[str, Any] = convert_to_openai_tool(tool)["function"]["parameters"].get(
        "properties", {}
    )
    return props


def as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, AIMessage | ToolMessage):
        return str(result.content)
    try:
        return json.dumps(result, default=str)
    except TypeError:
        return str(result)
