"""``search_docs``: the LangChain tool through which agents search the local knowledge base."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from teamgraph.errors import RunStop
from teamgraph.knowledge import Hit, KnowledgeBase
from teamgraph.knowledge import rerank as reranking
from teamgraph.knowledge.rerank import Ask

TOOL_NAME = "search_docs"
TOOL_DESCRIPTION = (
    "Search the local knowledge base (documents ingested with `teamgraph ingest`) for passages "
    "relevant to a query; returns the best passages with their source file and heading."
)
MAX_PASSAGE_CHARS = 600
log = logging.getLogger(__name__)


class SearchDocsInput(BaseModel):
    """Arguments of the ``search_docs`` tool."""

    query: str = Field(description="What to look for: keywords or a question, in any language.")


def format_hits(hits: Sequence[Hit]) -> str:
    """Render hits as numbered blocks ``[n] <file name> — <heading>`` followed by the passage
    (trimmed to about 600 characters), separated by blank lines. No hits give ``""``."""
    return "\n\n".join(_format_hit(number, hit) for number, hit in enumerate(hits, start=1))


def make_search_docs_tool(kb: KnowledgeBase, k: int = 5, rerank: Ask | None = None) -> BaseTool:
    """Build the ``search_docs`` tool over ``kb``, returning at most ``k`` passages per call.

    The tool is asynchronous (the SQLite search runs in ``asyncio.to_thread``); a synchronous
    entry point is provided as well so ``tool.invoke`` also works. ``rerank``: the team's
    model orders the passages found (:mod:`teamgraph.knowledge.rerank`; asynchronous calls
    only); a failed reranking keeps the search's order.
    """

    def search(query: str) -> str:
        return _answer(query, kb.search(query, k))

    async def asearch(query: str) -> str:
        if rerank is None:
            return _answer(query, await asyncio.to_thread(kb.search, query, k))
        hits = await asyncio.to_thread(kb.search, query, reranking.candidates(k))
        try:
            return _answer(query, await reranking.rerank(query, hits, k, rerank))
        except RunStop:
            raise  # the run stops (budget, provider down): not a failed reranking
        except Exception:
            log.warning("reranking failed; the search's order is kept", exc_info=True)
            return _answer(query, hits[:k])

    return StructuredTool.from_function(
        func=search,
        coroutine=asearch,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=SearchDocsInput,
    )


def _answer(query: str, hits: Sequence[Hit]) -> str:
    return format_hits(hits) if hits else f'No documents matched "{query}".'


def _format_hit(number: int, hit: Hit) -> str:
    title = Path(hit.source).name
    if hit.heading:
        title = f"{title} — {hit.heading}"
    return f"[{number}] {title}\n{_trim(hit.text, MAX_PASSAGE_CHARS)}"


def _trim(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, marking the cut ``…``."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return text[:cut].rstrip() + " …"
