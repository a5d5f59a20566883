"""Shared memory: notes that agents save and search through LangGraph's Store, namespaced by
team and user, so they outlive steps, agents and threads."""

from __future__ import annotations

import time
import uuid
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from teamgraph.text import tokenize


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
