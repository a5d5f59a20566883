"""The offline model: a rule-based ``BaseChatModel`` that needs no key and no network.

It has no language understanding. It answers teamgraph's own requests by rules, reading what each
request is for from its :class:`~teamgraph.brief.Brief` (never from the prompt's wording): plans by
keyword decomposition, routing and tool choice by description overlap, answers by extracting the
most relevant sentences from tool results and previous steps. Every answer says it is offline.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from teamgraph import prompts
from teamgraph.brief import Brief, current_brief
from teamgraph.llm._comparison import comparison_answer
from teamgraph.llm._extractive import (
    Source,
    extractive_answer,
    quoted_sources,
    search_query,
    small_talk,
    split_blocks,
)
from teamgraph.llm._roles import (
    codeact_reply,
    collaborates,
    collaboration_reply,
    moderate,
    react_reply,
    supervisor_reply,
)
from teamgraph.planning.request_structure import parse_comparison
from teamgraph.planning.routing import WorkerInfo, overlap_score
from teamgraph.planning.rules import comparison_in_task, decompose
from teamgraph.text import split_clarified

# --- binding --------------------------------------------------------------------------------------
# Tool binding for teamgraph's own chat models (offline and the test doubles).


class BindsTools(BaseChatModel):
    """``bind_tools`` as real providers do: tools become OpenAI-format schemas passed to
    ``_generate`` with the ``tool_choice``."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)


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
    messages: Sequence[BaseMessage],
    tools: list[dict[str, Any]],
    tool_choice: Any,
    brief: Brief | None = None,
) -> AIMessage:
    """The offline model's whole behaviour: one reply to a conversation, by the request's brief
    (what the request is for, as data — never the prompt's wording). Without a brief (the model
    used directly), the last user message is the task."""
    brief = brief or current_brief() or _plain_brief(messages)
    return _with_usage(_reply(brief, messages, tools, tool_choice), messages)


def _reply(
    brief: Brief, messages: Sequence[BaseMessage], tools: list[dict[str, Any]], tool_choice: Any
) -> AIMessage:
    if brief.role == "planner":
        return _plan_reply(brief)
    if brief.role == "moderator" and tools:
        return moderate(brief.request, tools[0])
    if brief.role == "synthesizer":
        sources = [Source(label, text) for label, text in brief.context if text.strip()]
        return AIMessage(content=_synthesis(brief.request, sources))
    if brief.role == "supervisor" and tools:
        return supervisor_reply(brief, tools)
    if collaborates(brief, tools):  # collaborative outlines, drafts and review verdicts
        return collaboration_reply(brief)
    if brief.agent_kind == "react":
        return AIMessage(react_reply(brief, messages, fill_arguments))
    if brief.agent_kind == "codeact":
        return AIMessage(codeact_reply(brief, messages, fill_arguments))
    return _agent_reply(brief, messages, tools, tool_choice)


def _plain_brief(messages: Sequence[BaseMessage]) -> Brief:
    prompt = next((_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    return Brief(role="agent", request=prompt, task=prompt)


def _plan_reply(brief: Brief) -> AIMessage:
    workers = [WorkerInfo(m.name, m.description) for m in brief.members]
    plan = decompose(brief.request, workers, max_steps=brief.max_steps or 10)
    return AIMessage(content=f"```json\n{plan.model_dump_json(indent=2)}\n```")


def _task_and_context(brief: Brief) -> tuple[str, list[Source]]:
    """What the member is asked and the outputs it was given: from the brief, or read from the
    prompt when the brief holds none (a nested team's step gets its parent step's prompt)."""
    task = brief.request if brief.handoff_from else brief.task
    context = list(brief.context)
    if not context:
        task, context = prompts.split_worker_prompt(task)
    return task, [Source(label, text) for label, text in context if text.strip()]


def _agent_reply(
    brief: Brief, messages: Sequence[BaseMessage], tools: list[dict[str, Any]], tool_choice: Any
) -> AIMessage:
    """A member at work: call the tool that fits the task (once per turn), then answer from
    what the tools returned and the task's context. A handed-over conversation is worked as
    the user's latest message (the handoff note would only match the handoff tools)."""
    task, context = _task_and_context(brief)
    forced = _forced_tool(tools, tool_choice)
    if forced is not None:
        return _call(forced, task)
    if not context and (reply := small_talk(task)) is not None:
        return AIMessage(content=reply)  # a greeting searches nothing
    if tools and not _called_tools(messages):
        chosen = _choose_tool(task, tools)
        if chosen is not None:
            return _call(chosen, task)
    sources = context + _tool_results(messages)
    if context:  # a step working on earlier steps' findings: a comparison weighs them
        return AIMessage(content=_synthesis(brief.request, sources, task))
    return AIMessage(content=extractive_answer(task, sources))


def _synthesis(request: str, sources: list[Source], task: str | None = None) -> str:
    """An answer from earlier findings: for a comparison, per-aspect verdicts across every
    entity, a table and a conclusion; else the most relevant sentences of ``task``'s sources."""
    comparison = comparison_in_task(task or "") or (
        parse_comparison(split_clarified(request)[0]) if request else None
    )
    if comparison is None:
        return extractive_answer(task or request, sources)
    quoted = [q for source in sources for q in quoted_sources(source.label, source.text)]
    return comparison_answer(comparison, quoted)


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


def _call(tool: dict[str, Any], task: str) -> AIMessage:
    fn = tool["function"]
    args = fill_arguments(fn.get("parameters", {}), task.strip())
    call = {"name": fn["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])


def fill_arguments(schema: dict[str, Any], task: str) -> dict[str, Any]:
    """Arguments for a tool call, guessed from the JSON schema and the task text."""
    args: dict[str, Any] = {}
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", list(props)):
        args[name] = _guess(name, props.get(name, {}), task)
    return args


_VERBATIM = frozenset({"text", "content", "body", "note", "message", "value", "description"})


def _guess(name: str, prop: dict[str, Any], task: str) -> Any:
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
        return fill_arguments(prop, task)
    if name.lower() in _VERBATIM:  # what to write down: the words after "Save a note:", as written
        first = task.strip().splitlines()[0] if task.strip() else ""
        return (first.split(":", 1)[-1].strip() or first)[:500]
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


CHUNK_WORDS = 6  # words per streamed chunk: a provider's chunk is a few tokens, not one word


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """The reply streamed a few words at a time (every chunk costs LangChain's streaming path
    about 0.1 ms of CPU: per-word chunks were a quarter of an offline run's CPU)."""
    words = re.findall(r"\S+\s*|\s+", _text(message)) or [""]
    pieces = ["".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        chunk = AIMessageChunk(
            content=piece,
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
