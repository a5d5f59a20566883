"""The offline model: a rule-based ``BaseChatModel`` that needs no key and no network.

It has no language understanding. It recognises teamgraph's own prompts and answers them by rules:
plans by keyword decomposition, tool choice by description overlap, answers by extracting the most
relevant sentences from tool results and previous steps. Every answer says it is offline.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from teamgraph import prompts
from teamgraph.llm import _collab
from teamgraph.llm._binding import BindsTools, listed_members
from teamgraph.llm._extractive import Source, extractive_answer, search_query, split_blocks
from teamgraph.llm._moderation import moderate
from teamgraph.llm._protocols import codeact_reply, react_reply
from teamgraph.llm._supervision import supervisor_reply
from teamgraph.planning.routing import overlap_score
from teamgraph.planning.rules import decompose

_MAX_STEPS = re.compile(r"between 1 and (\d+) steps")


class OfflineChatModel(BindsTools):
    """``model: offline``. ``latency`` (seconds) delays every reply, for demos and crash tests."""

    model_name: str = "offline"
    latency: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "teamgraph-offline"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = respond(messages, kwargs.get("tools") or [], kwargs.get("tool_choice"))
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._generate(messages, stop, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = respond(messages, kwargs.get("tools") or [], kwargs.get("tool_choice"))
        yield from _chunks(message)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        if self.latency:
            await asyncio.sleep(self.latency)
        message = respond(messages, kwargs.get("tools") or [], kwargs.get("tool_choice"))
        for chunk in _chunks(message):
            if run_manager and isinstance(chunk.message.content, str) and chunk.message.content:
                await run_manager.on_llm_new_token(chunk.message.content, chunk=chunk)
            yield chunk


def respond(
    messages: Sequence[BaseMessage], tools: list[dict[str, Any]], tool_choice: Any
) -> AIMessage:
    """The offline model's whole behaviour: one reply to a conversation."""
    system = next((_text(m) for m in messages if isinstance(m, SystemMessage)), "")
    humans = [_text(m) for m in messages if isinstance(m, HumanMessage)]
    if system.startswith(prompts.PLANNER_HEADER):
        reply = _plan_reply(system, humans[0] if humans else "")
    elif system.startswith(prompts.MODERATOR_HEADER) and tools:
        reply = moderate(humans[-1] if humans else "", tools[0])
    elif system.startswith(prompts.SYNTHESIZER_HEADER):
        reply = _synth_reply(humans[-1] if humans else "")
    elif system.startswith(prompts.SUPERVISOR_HEADER) and tools and tool_choice:
        reply = supervisor_reply(messages, tools)
    elif _collab.handles(messages, tools, tool_choice):  # swarm handoffs, review verdicts
        reply = _collab.reply(messages, tools, tool_choice, respond)
    elif prompts.REACT_HEADER in system and humans:
        reply = AIMessage(react_reply(system, humans, fill_arguments, _sections))
    elif prompts.CODEACT_HEADER in system and humans:
        reply = AIMessage(codeact_reply(system, humans, fill_arguments, _sections))
    else:
        reply = _agent_reply(messages, tools, tool_choice)
    return _with_usage(reply, messages)


def _plan_reply(system: str, request: str) -> AIMessage:
    workers = listed_members(system, prompts.WORKERS_HEADING)
    found = _MAX_STEPS.search(system)
    max_steps = int(found.group(1)) if found else 10
    plan = decompose(request, workers, max_steps=max_steps)
    return AIMessage(content=f"```json\n{plan.model_dump_json(indent=2)}\n```")


def _synth_reply(prompt: str) -> AIMessage:
    request = prompt.split(prompts.REQUEST_HEADING, 1)[-1].split(prompts.STEP_RESULTS_HEADING)[0]
    results = prompt.split(prompts.STEP_RESULTS_HEADING, 1)[-1]
    return AIMessage(content=extractive_answer(request.strip(), _sections(results)))


def _agent_reply(
    messages: Sequence[BaseMessage], tools: list[dict[str, Any]], tool_choice: Any
) -> AIMessage:
    prompt = next((_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    task, _, context = prompt.partition(prompts.CONTEXT_HEADING)
    results = _tool_results(messages)
    forced = _forced_tool(tools, tool_choice)
    if forced is not None:
        return _call(forced, task, context)
    if tools and not _called_tools(messages):
        chosen = _choose_tool(task, tools)
        if chosen is not None:
            return _call(chosen, task, context)
    sources = _sections(context) + results
    return AIMessage(content=extractive_answer(task, sources))


def _called_tools(messages: Sequence[BaseMessage]) -> bool:
    """Whether tools already answered in this turn (successfully or not): then answer."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return any(isinstance(m, ToolMessage) for m in messages[last_human + 1 :])


def _tool_results(messages: Sequence[BaseMessage]) -> list[Source]:
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    results: list[Source] = []
    for message in messages[last_human + 1 :]:
        if isinstance(message, ToolMessage) and message.status == "error":
            results.append(Source(f"{message.name or 'tool'} (error)", _text(message)))
        elif isinstance(message, ToolMessage):
            results.extend(split_blocks(message.name or "tool", _text(message)))
    return results


def _sections(text: str) -> list[Source]:
    sources = []
    for block in re.split(r"^### ", text, flags=re.MULTILINE)[1:]:
        label, _, body = block.partition("\n")
        if body.strip():
            sources.append(Source(label.strip(), body.strip()))
    return sources


def _forced_tool(tools: list[dict[str, Any]], choice: Any) -> dict[str, Any] | None:
    if not tools or choice in (None, "auto", "none", False):
        return None
    if isinstance(choice, dict):
        choice = choice.get("function", {}).get("name") or choice.get("name")
    if isinstance(choice, str) and choice not in ("any", "required"):
        return next((t for t in tools if t["function"]["name"] == choice), None)
    return tools[0]


def _choose_tool(task: str, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    def score(tool: dict[str, Any]) -> float:
        fn = tool["function"]
        return overlap_score(task, f"{fn['name'].replace('_', ' ')} {fn.get('description', '')}")

    best = max(tools, key=score)
    if score(best) > 0:
        return best
    # no word in common: a question still deserves a look in the knowledge base, if there is one
    return next((t for t in tools if t["function"]["name"] == "search_docs"), None)


def _call(tool: dict[str, Any], task: str, context: str) -> AIMessage:
    fn = tool["function"]
    args = fill_arguments(fn.get("parameters", {}), task.strip(), context)
    call = {"name": fn["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])


def fill_arguments(schema: dict[str, Any], task: str, context: str) -> dict[str, Any]:
    """Arguments for a tool call, guessed from the JSON schema and the task text."""
    args: dict[str, Any] = {}
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", list(props)):
        args[name] = _guess(props.get(name, {}), task, context)
    return args


def _guess(prop: dict[str, Any], task: str, context: str) -> Any:
    if "enum" in prop:
        return prop["enum"][0]
    kind = prop.get("type", "string")
    if kind in ("integer", "number"):
        found = re.search(r"-?\d+(?:\.\d+)?", task)
        value = float(found.group()) if found else 0
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return fill_arguments(prop, task, context)
    return search_query(task)[:500]


def _with_usage(message: AIMessage, messages: Sequence[BaseMessage]) -> AIMessage:
    prompt_chars = sum(len(_text(m)) for m in messages)
    out_chars = len(_text(message)) + sum(len(json.dumps(c["args"])) for c in message.tool_calls)
    usage = UsageMetadata(
        input_tokens=max(1, prompt_chars // 4),
        output_tokens=max(1, out_chars // 4),
        total_tokens=max(1, prompt_chars // 4) + max(1, out_chars // 4),
    )
    message.usage_metadata = usage
    message.response_metadata = {"model_name": "offline"}
    return message


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    words = re.findall(r"\S+\s*|\s+", _text(message)) or [""]
    for i, word in enumerate(words):
        last = i == len(words) - 1
        chunk = AIMessageChunk(
            content=word,
            id=message.id,
            usage_metadata=message.usage_metadata if last else None,
            response_metadata=message.response_metadata if last else {},
            tool_call_chunks=[
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": j}
                for j, c in enumerate(message.tool_calls)
            ]
            if last
            else [],
        )
        yield ChatGenerationChunk(message=chunk)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
