"""The light call paths (``direct_call`` for non-streaming models, ``direct_stream`` for streaming
ones): the same reply as ``ainvoke`` / the same chunks as ``astream``, and only taken when no
callback, tracer, cache or hook could notice their absence."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler, get_usage_metadata_callback
from langchain_core.globals import set_debug
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langsmith import tracing_context

from teamgraph import Plan, Step
from teamgraph.llm import lean_calls as direct_module
from teamgraph.llm.lean_calls import direct_call, direct_stream, streams
from teamgraph.llm.offline import OfflineChatModel
from teamgraph.testing import FunctionChatModel, ScriptedChatModel, ToolCall

from .helpers import by_type, run_collect, workflow_team

MESSAGES: list[BaseMessage] = [HumanMessage("hello")]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


class Recorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.starts = 0

    async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.starts += 1


def _script() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[ToolCall("lookup", {"query": "x"}, id="c1")])


async def test_the_direct_reply_is_the_reply_ainvoke_gives() -> None:
    direct = direct_call(_script().bind_tools([lookup]), MESSAGES)
    assert direct is not None
    reply = await direct()
    expected = await _script().bind_tools([lookup]).ainvoke(MESSAGES)
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls == expected.tool_calls
    assert reply.usage_metadata == expected.usage_metadata
    assert reply.response_metadata == expected.response_metadata
    assert reply.id is not None and reply.id.startswith("lc_run-")


async def test_bound_kwargs_reach_the_model() -> None:
    seen: list[Any] = []

    class Spy(FunctionChatModel):
        async def _agenerate(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
            seen.append((stop, sorted(kwargs)))
            return await super()._agenerate(messages, stop, **kwargs)

    model = Spy(fn=lambda _: "ok").bind_tools([lookup]).bind(stop=["END"])
    direct = direct_call(model, MESSAGES)
    assert direct is not None and (await direct()).text == "ok"
    assert seen == [(["END"], ["tool_choice", "tools"])]


class Streaming(FunctionChatModel):
    async def _astream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError
        yield


def test_streaming_models_and_other_runnables_take_the_ordinary_path() -> None:
    assert streams(Streaming(fn=lambda _: "ok")) and streams(OfflineChatModel())
    assert direct_call(Streaming(fn=lambda _: "ok"), MESSAGES) is None
    assert direct_call(OfflineChatModel(), MESSAGES) is None
    assert direct_call(RunnableLambda(lambda x: x), MESSAGES) is None
    configured = FunctionChatModel(fn=lambda _: "ok").with_config(tags=["t"])
    assert direct_call(configured, MESSAGES) is None


def test_model_settings_that_need_the_ordinary_path() -> None:
    fn = lambda _: "ok"  # noqa: E731
    assert direct_call(FunctionChatModel(fn=fn), MESSAGES) is not None
    assert direct_call(FunctionChatModel(fn=fn, callbacks=[Recorder()]), MESSAGES) is None
    assert direct_call(FunctionChatModel(fn=fn, cache=InMemoryCache()), MESSAGES) is None
    assert direct_call(FunctionChatModel(fn=fn, verbose=True), MESSAGES) is None
    assert direct_call(FunctionChatModel(fn=fn, output_version="v1"), MESSAGES) is None
    blocks = [HumanMessage(content=[{"type": "text", "text": "hi"}])]
    assert direct_call(FunctionChatModel(fn=fn), blocks) is None


async def test_active_handlers_and_hooks_take_the_ordinary_path() -> None:
    model = FunctionChatModel(fn=lambda _: "ok")
    recorder = Recorder()

    async def inside(_: Any) -> bool:
        return direct_call(model, MESSAGES) is None

    assert await RunnableLambda(inside).ainvoke(None, {"callbacks": [recorder]})
    assert not await RunnableLambda(inside).ainvoke(None)
    with get_usage_metadata_callback():
        assert direct_call(model, MESSAGES) is None
    set_debug(True)
    try:
        assert direct_call(model, MESSAGES) is None
    finally:
        set_debug(False)


def test_langsmith_tracing_takes_the_ordinary_path() -> None:
    with tracing_context(enabled=True):  # what LANGSMITH_TRACING=true also turns on
        assert direct_call(FunctionChatModel(fn=lambda _: "ok"), MESSAGES) is None


async def test_a_run_with_a_model_callback_reports_every_call(settings: Any) -> None:
    recorder = Recorder()
    model = FunctionChatModel(fn=lambda _: "ok", callbacks=[recorder])
    team = workflow_team(settings, model)
    plan = Plan(name="p", steps=[Step(id=i, worker="researcher", task=f"task {i}") for i in "ab"])
    result, events = await run_collect(team, "x", plan=plan)
    assert result.status == "completed" and recorder.starts == 2
    assert len(by_type(events, "usage")) == 2 and result.usage.total_tokens == 30


class Chunky(FunctionChatModel):
    """Streams ``fn``'s reply two characters a chunk, its tool calls and usage in the last."""

    async def _astream(self, messages: Any, stop: Any = None, **kwargs: Any) -> Any:
        message = self._result(self._next(messages), kwargs.get("tools") or [])
        reply = message.generations[0].message
        text = str(reply.content)
        pieces = [text[i : i + 2] for i in range(0, len(text), 2)] or [""]
        calls = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"]}
            for c in getattr(reply, "tool_calls", [])
        ]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            chunk = AIMessageChunk(
                content=piece,
                usage_metadata=getattr(reply, "usage_metadata", None) if last else None,
                tool_call_chunks=[{**c, "index": j} for j, c in enumerate(calls)] if last else [],
            )
            yield ChatGenerationChunk(
                message=chunk, generation_info={"finish": last} if last else None
            )


def _merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return chunks[0] + chunks[1:]


async def test_the_direct_stream_is_the_stream_astream_gives() -> None:
    model = Chunky(fn=lambda _: "streamed reply").bind(stop=["END"])
    light = direct_stream(model, MESSAGES)
    assert light is not None
    direct = [chunk async for chunk in light()]
    ordinary = [chunk async for chunk in model.astream(MESSAGES)]
    assert [c.text for c in direct] == [c.text for c in ordinary if c.text]
    mine, theirs = _merged(direct), _merged(ordinary)
    assert mine.text == theirs.text == "streamed reply"
    assert mine.usage_metadata == theirs.usage_metadata
    assert mine.response_metadata == theirs.response_metadata == {"finish": True}
    assert mine.id is not None and mine.id.startswith("lc_run-")


async def test_the_direct_stream_carries_tool_calls() -> None:
    model = Chunky(fn=lambda _: ToolCall("lookup", {"query": "x"}, id="c1")).bind_tools([lookup])
    light = direct_stream(model, MESSAGES)
    assert light is not None
    merged = _merged([chunk async for chunk in light()])
    ordinary = _merged([chunk async for chunk in model.astream(MESSAGES)])
    assert merged.tool_calls == ordinary.tool_calls
    assert merged.tool_calls == [
        {"name": "lookup", "args": {"query": "x"}, "id": "c1", "type": "tool_call"}
    ]


async def test_observed_or_non_streaming_calls_do_not_stream_directly() -> None:
    fn = lambda _: "ok"  # noqa: E731
    assert direct_stream(Chunky(fn=fn), MESSAGES) is not None
    assert direct_stream(OfflineChatModel(), MESSAGES) is not None
    assert direct_stream(FunctionChatModel(fn=fn), MESSAGES) is None  # no _astream: direct_call
    assert direct_stream(Chunky(fn=fn, disable_streaming=True), MESSAGES) is None
    assert direct_stream(Chunky(fn=fn, callbacks=[Recorder()]), MESSAGES) is None
    assert direct_stream(Chunky(fn=fn).with_config(tags=["t"]), MESSAGES) is None

    async def inside(_: Any) -> bool:
        return direct_stream(Chunky(fn=fn), MESSAGES) is None

    assert await RunnableLambda(inside).ainvoke(None, {"callbacks": [Recorder()]})
    with tracing_context(enabled=True):
        assert direct_stream(Chunky(fn=fn), MESSAGES) is None


async def test_a_run_streams_the_same_tokens_with_or_without_a_callback(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct_calls = []
    light = direct_module._stream

    def counted(*args: Any) -> Any:
        direct_calls.append(args)
        return light(*args)

    monkeypatch.setattr(direct_module, "_stream", counted)
    plan = Plan(name="p", steps=[Step(id=i, worker="researcher", task=f"task {i}") for i in "ab"])
    recorder = Recorder()
    texts = []
    for callbacks, direct in (([], 2), ([recorder], 0)):  # the light path only when unobserved
        direct_calls.clear()
        model = Chunky(fn=lambda _: "a streamed answer", callbacks=callbacks)
        team = workflow_team(settings, model)
        run_id = f"run-{len(texts)}"
        result, events = await run_collect(team, "x", plan=plan, run_id=run_id)
        assert result.status == "completed" and result.usage.total_tokens == 30
        tokens = by_type(events, "token")
        texts.append(
            {e.step_id: "".join(t.text for t in tokens if t.step_id == e.step_id) for e in tokens}
        )
        assert len(direct_calls) == direct
    assert texts[0] == texts[1] == {"a": "a streamed answer", "b": "a streamed answer"}
    assert recorder.starts == 2
