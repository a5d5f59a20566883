"""Running an agent's tool calls: events, journal, unknown tools, failures, approvals, state.

Whatever goes wrong becomes an error result the agent sees — never an exception that ends the
step — except a sensitive call awaiting a human decision, which pauses the run
(:class:`~teamgraph.errors.ApprovalPending`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command
from pydantic import BaseModel

from teamgraph.durable import JournalKey, ToolEntry, at_most_once, once
from teamgraph.errors import ApprovalPending
from teamgraph.events import ToolCalled, ToolReturned
from teamgraph.pauses import ApprovalRequest, Decision
from teamgraph.run_context import RunContext
from teamgraph.tools.handoff import transferred

STATE_ARG = "state"


INTERRUPTED = (
    "The approved call to {tool} was started before the process stopped, and its result was "
    "lost; it was not run again, so its effect is unknown. Check whether it took effect before "
    "asking for it again."
)


class Toolbox:
    """The tools one agent may call, bound to the run and step it works in."""

    def __init__(
        self, tools: Sequence[BaseTool], ctx: RunContext, agent: str, step_id: str | None
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.ctx, self.agent, self.step_id = ctx, agent, step_id
        self.handoff: str | None = None  # set when a tool returned Command(goto=...)

    @property
    def names(self) -> list[str]:
        return sorted(self.tools)

    def describe(self) -> str:
        """One line per tool — name, description, arguments (JSON Schema) — for text prompts."""
        lines = [
            f"- {t.name}: {t.description} Arguments: {json.dumps(call_properties(t))}"
            for t in self.tools.values()
        ]
        return "\n".join(lines) or "- (no tools)"

    async def call(
        self, name: str, args: dict[str, Any], call_id: str, key: JournalKey
    ) -> tuple[str, bool]:
        """Run one call exactly once (:func:`~teamgraph.durable.once`); returns ``(text,
        is_error)``. ``key`` names the call in the run's journal: a call an earlier execution
        made (before a crash or a pause) returns its recorded result and is not announced
        again. A sensitive call pauses the run (:class:`ApprovalPending`) until a human
        decides; an approved one is started at most once, across crashes."""
        entry = await once(
            self.ctx.journal,
            key,
            ToolEntry,
            partial(self._invoke, name, args, call_id, key),
            crash="tool",
            announce=partial(self._emit, ToolCalled, name, call_id=call_id, args=args),
            settle=lambda done: self._emit(
                ToolReturned, name, call_id=call_id, output=done.content, is_error=done.is_error
            ),
        )
        self.handoff = entry.goto or self.handoff
        return entry.content, entry.is_error

    async def call_message(self, call: ToolCall, key: JournalKey) -> ToolMessage:
        call_id = call.get("id") or ""
        content, is_error = await self.call(call["name"], call["args"], call_id, key)
        status = "error" if is_error else "success"
        return ToolMessage(content=content, tool_call_id=call_id, name=call["name"], status=status)

    def _emit(self, cls: Any, tool: str, **fields: Any) -> None:
        self.ctx.emit(
            cls, self.agent, tool, agent=self.agent, tool=tool, step_id=self.step_id, **fields
        )

    async def _invoke(
        self, name: str, args: dict[str, Any], call_id: str, key: JournalKey
    ) -> ToolEntry:
        tool = self.tools.get(name)
        if tool is None:
            names = ", ".join(self.names) or "none"
            return ToolEntry(f"Tool {name} not found. Available: {names}", is_error=True)
        if not self._sensitive(tool):
            return await self._run_or_replay(tool, args, key.text)
        decision = self._decision(tool, args, call_id, key.text)
        if decision.action == "reject":
            comment = decision.comment or "no reason given"
            return ToolEntry(f"The user rejected this call to {name}: {comment}", True)
        if decision.action == "edit":
            args = dict(decision.args or {})
            self._emit(ToolCalled, name, call_id=call_id, args=args)  # what really runs
        lost = ToolEntry(INTERRUPTED.format(tool=name), is_error=True)
        run = partial(self._run_or_replay, tool, args, key.text)
        return await at_most_once(self.ctx.journal, key, run, lambda: lost)

    async def _run_or_replay(self, tool: BaseTool, args: dict[str, Any], key: str) -> ToolEntry:
        """The tool's result: from the run's recording when replaying one, else by running it
        (and recording it when recording)."""
        cassette = self.ctx.cassette
        site = f"{self.ctx.site(self.step_id or self.agent)}:{key.rsplit('/', 1)[-1]}"
        if cassette is not None and cassette.replaying:
            content, is_error, goto = cassette.tool_result(site, tool.name, args)
            return ToolEntry(content, is_error, goto)
        entry = await self._run(tool, args)
        if cassette is not None:
            cassette.record_tool(site, tool.name, args, entry.content, entry.is_error, entry.goto)
        return entry

    async def _run(self, tool: BaseTool, args: dict[str, Any]) -> ToolEntry:
        try:
            result = await tool.ainvoke(self._with_state(tool, args))
        except Exception as exc:  # a tool's failure is the agent's information, not a crash
            return ToolEntry(f"Error: {type(exc).__name__}: {exc}", is_error=True)
        if isinstance(result, Command) and isinstance(result.goto, str):
            return ToolEntry(transferred(result.goto), goto=result.goto)
        return ToolEntry(as_text(result))

    def _decision(self, tool: BaseTool, args: dict[str, Any], call_id: str, key: str) -> Decision:
        """The human's decision on this call, or pause the run to ask for one."""
        if not self.ctx.approvals:
            return Decision.reject("approvals are disabled for this run")
        decision = self.ctx.decisions.get(key)
        if decision is None:
            self.ctx.pending.append(
                ApprovalRequest(
                    id=key,
                    agent=self.agent,
                    tool=tool.name,
                    args=args,
                    call_id=call_id,
                    step_id=self.step_id,
                    args_schema=_arguments_schema(tool),
                )
            )
            raise ApprovalPending(key)
        return decision

    def _sensitive(self, tool: BaseTool) -> bool:
        metadata = tool.metadata or {}
        approvals = self.ctx.team.approvals
        if metadata.get("handoff_to") and tool.name not in approvals.tools:
            return False  # transfer_to_<agent> is not a "transfer" of anything sensitive
        return approvals.requires_approval(tool.name, bool(metadata.get("requires_approval")))

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
    parameters: dict[str, Any] = convert_to_openai_tool(tool)["function"]["parameters"]
    props: dict[str, Any] = parameters.get("properties", {})
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


def _arguments_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of what a model (or a human editing the call) passes to ``tool``."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return schema
    if issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema.schema()  # a pydantic v1 model
