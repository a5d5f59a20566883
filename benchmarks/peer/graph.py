"""The peer's graph for ``benchmarks/peer_server.py``: the benchmark team's shape (``a`` → ``b``,
``c`` → ``d``) as a plain LangGraph graph, served by ``langgraph dev``.

Each step does the CPU work of one offline-model call (``work``, calibrated by the benchmark in
its own process) and returns the text teamgraph's offline model wrote for that step; with
``"model": true`` it also streams that text through a LangChain chat model, six words a chunk as
the offline model does, so ``messages-tuple`` streams tokens. ``PEER_BENCH`` (JSON) configures
it: ``iterations``, ``replies`` (per step), ``model``, ``slow_s`` (the ``bench_slow`` graph's
wait per step)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, StateGraph

STEPS = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
CONFIG: dict[str, Any] = json.loads(os.environ.get("PEER_BENCH") or "{}")


def work(iterations: int) -> int:
    """Deterministic CPU work standing for the offline model's (the same loop in both
    interpreters: the benchmark calibrates it in its own)."""
    value = 0
    for index in range(iterations):
        value = (value * 31 + index) % 1_000_003
    return value


class Scripted(BaseChatModel):
    """A chat model that streams a fixed reply, six words a chunk."""

    reply: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        words = re.findall(r"\S+\s*", self.reply)
        for start in range(0, len(words), 6):
            chunk = ChatGenerationChunk(message=AIMessageChunk("".join(words[start : start + 6])))
            if run_manager:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


def _merge(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    return {**left, **right}


class State(TypedDict, total=False):
    request: str
    results: Annotated[dict[str, str], _merge]


def step(name: str, delay: float) -> Callable[[State], Awaitable[State]]:
    async def run(state: State) -> State:
        if delay:
            await asyncio.sleep(delay)
        work(CONFIG.get("iterations", 0))
        reply = CONFIG.get("replies", {}).get(name, name)
        if CONFIG.get("model"):
            prompt = [HumanMessage(f"{state.get('request', '')} (step {name})")]
            reply = (await Scripted(reply=reply).ainvoke(prompt)).text
        return {"results": {name: reply}}

    return run


def build(delay: float = 0.0) -> StateGraph[State]:
    graph = StateGraph(State)
    for name, after in STEPS.items():
        graph.add_node(name, step(name, delay))
        for before in after or [START]:
            graph.add_edge(before, name)
    graph.add_edge("d", END)
    return graph


graph = build().compile()
slow = build(float(CONFIG.get("slow_s", 1.0))).compile()
