"""One registry of LangChain tools: built-ins and ``module:function`` references alike — and the
note tools (``save_note``, ``search_notes``) it builds over the run's store."""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, tool

from teamgraph.errors import ToolNotFound
from teamgraph.text import tokenize


@dataclass
class ToolResources:
    """What tool factories may need from the running system."""

    knowledge: Any = None  # teamgraph.knowledge.KnowledgeBase, when the team has one
    store: Any = None  # a LangGraph BaseStore for shared notes
    notes_namespace: tuple[str, ...] = ("teamgraph", "notes")
    rerank: Any = None  # async (prompt) -> the team model's reply, when search_docs reranks


ToolFactory = Callable[[ToolResources], BaseTool]


class ToolRegistry:
    """Maps tool names to factories; ``package.module:function`` names import on demand."""

    def __init__(self) -> None:
        self._factories: dict[str, ToolFactory] = {}

    def register(self, name: str, factory: ToolFactory) -> None:
        self._factories[name] = factory

    def add(self, tool: BaseTool, name: str | None = None) -> None:
        """Register a ready tool instance (a Python ``@tool``, an MCP tool) under ``name``."""
        self._factories[name or tool.name] = lambda _resources: tool

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def build(self, name: str, resources: ToolResources) -> BaseTool:
        if name in self._factories:
            return self._factories[name](resources)
        if ":" in name:
            return import_tool(name)
        raise ToolNotFound(f"unknown tool {name!r} (available: {', '.join(self.names())})")


def import_tool(reference: str) -> BaseTool:
    """Load ``package.module:attribute``: a ``BaseTool`` as is, a plain function wrapped as one."""
    module_name, _, attr = reference.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ToolNotFound(f"cannot import tool {reference!r}: {exc}") from None
    if isinstance(target, BaseTool):
        return target
    if callable(target):
        wrapped: BaseTool = tool(target)
        return wrapped
    raise ToolNotFound(f"tool {reference!r} is neither a LangChain tool nor a function")


def _note_tool(index: int) -> ToolFactory:
    def factory(resources: ToolResources) -> BaseTool:
        if resources.store is None:
            raise ToolNotFound("save_note and search_notes need a store; none is configured")
        return make_note_tools(resources.store, resources.notes_namespace)[index]

    return factory


def builtin_registry() -> ToolRegistry:
    """The registry with teamgraph's built-in tools."""
    from teamgraph.tools.library import register_library
    from teamgraph.tools.search_docs import make_search_docs_tool

    registry = ToolRegistry()

    def search_docs(resources: ToolResources) -> BaseTool:
        if resources.knowledge is None:
            raise ToolNotFound("search_docs needs a knowledge base; none is configured")
        return make_search_docs_tool(resources.knowledge, rerank=resources.rerank)

    registry.register("search_docs", search_docs)
    for index, name in enumerate(("save_note", "search_notes")):
        registry.register(name, _note_tool(index))
    register_library(registry)
    return registry


# --- notes -------------------------------------------------------------------------------------
# Shared memory: notes that agents save and search through LangGraph's Store, namespaced by team
# and user, so they outlive steps, agents and threads.
def make_note_tools(store: Any, namespace: tuple[str, ...]) -> tuple[BaseTool, BaseTool]:
    """``save_note`` and ``search_notes`` over ``store`` (a LangGraph ``BaseStore``)."""

    async def save_note(text: str) -> str:
        """Save a note to the team's shared memory for later steps, agents and conversations."""
        key = uuid.uuid4().hex
        await store.aput(namespace, key, {"text": text, "saved_at": time.time()}, index=False)
        return f"saved note {key[:8]}"

    async def search_notes(query: str, limit: int = 5) -> str:
        """Search the notes saved in the team's shared memory (by this and other agents)."""
        items = await store.asearch(namespace, limit=1000)
        wanted = set(tokenize(query))
        scored = sorted(
            ((len(wanted & set(tokenize(i.value["text"]))), i.value["saved_at"], i) for i in items),
            key=lambda t: (t[0], t[1]),
            reverse=True,
        )
        hits = [item.value["text"] for score, _, item in scored if score > 0][:limit]
        if not hits:
            return f'No notes matched "{query}".'
        return "\n".join(f"- {text}" for text in hits)

    return (
        StructuredTool.from_function(coroutine=save_note, name="save_note"),
        StructuredTool.from_function(coroutine=search_notes, name="search_notes"),
    )
