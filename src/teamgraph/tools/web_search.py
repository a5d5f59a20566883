"""``web_search``: Tavily when ``TAVILY_API_KEY`` is set, else DuckDuckGo via ``ddgs``."""

from __future__ import annotations

import asyncio
import importlib
import os
from typing import Any, NamedTuple

import httpx
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools._http import guarded, http_client, online_tool

TAVILY_URL = "https://api.tavily.com/search"
MAX_RESULTS = 10
MAX_SNIPPET_CHARS = 400
DESCRIPTION = (
    "Search the web (internet) for the latest information, news, facts, people, products or "
    "pages about a query; returns numbered results with title, URL and snippet."
)


class WebSearchInput(BaseModel):
    """Arguments of the ``web_search`` tool."""

    query: str = Field(description="What to search for, as you would type it into a search box.")
    max_results: int = Field(default=5, description=f"How many results (1 to {MAX_RESULTS}).")


class SearchResult(NamedTuple):
    """One web search hit."""

    title: str
    url: str
    snippet: str


def format_results(query: str, results: list[SearchResult]) -> str:
    """Numbered ``title / url / snippet`` blocks, or a "no results" line."""
    if not results:
        return f"no web results for {query!r}"
    blocks = []
    for number, hit in enumerate(results, start=1):
        snippet = " ".join(hit.snippet.split())
        if len(snippet) > MAX_SNIPPET_CHARS:
            snippet = snippet[:MAX_SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
        blocks.append(f"{number}. {hit.title.strip() or hit.url}\n   {hit.url}\n   {snippet}")
    return "\n".join(blocks)


def make_web_search_tool(
    api_key: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout_s: float = 10,
) -> BaseTool:
    """Build ``web_search``. ``api_key`` defaults to ``$TAVILY_API_KEY``, read at each call;
    ``transport`` replaces the network for Tavily (tests use ``MockTransport``)."""

    async def web_search(query: str, max_results: int = 5) -> str:
        if not query.strip():
            raise ToolException("give a search query")
        count = max(1, min(max_results, MAX_RESULTS))
        key = api_key or os.environ.get("TAVILY_API_KEY", "").strip()
        if key:
            async with http_client(transport, timeout_s) as client:
                results = await guarded(_tavily(client, query, count, key), timeout_s, "Tavily")
        else:
            results = await _duckduckgo(query, count, timeout_s)
        return format_results(query, results)

    return online_tool("web_search", DESCRIPTION, WebSearchInput, web_search)


async def _tavily(
    client: httpx.AsyncClient, query: str, count: int, key: str
) -> list[SearchResult]:
    body = {"query": query, "max_results": count, "search_depth": "basic"}
    headers = {"Authorization": f"Bearer {key}"}
    response = await client.post(TAVILY_URL, json=body, headers=headers)
    response.raise_for_status()
    hits: list[dict[str, Any]] = response.json()["results"]
    return [SearchResult(h.get("title", ""), h["url"], h.get("content", "")) for h in hits][:count]


async def _duckduckgo(query: str, count: int, timeout_s: float) -> list[SearchResult]:
    try:
        ddgs = importlib.import_module("ddgs")  # optional dependency, imported on first use
    except ImportError:
        raise ToolException(
            "web search unavailable: set TAVILY_API_KEY or `pip install ddgs` (DuckDuckGo)"
        ) from None

    def search() -> list[dict[str, Any]]:
        return list(ddgs.DDGS(timeout=max(1, round(timeout_s))).text(query, max_results=count))

    try:
        async with asyncio.timeout(timeout_s):
            hits = await asyncio.to_thread(search)
    except TimeoutError:
        raise ToolException(f"timed out after {timeout_s:g} s") from None
    except Exception as exc:  # ddgs raises its own exception types for network failures
        if "no results" in str(exc).lower():
            return []
        raise ToolException(f"network unavailable: DuckDuckGo search failed: {exc}") from None
    hits = hits[:count]
    return [SearchResult(h.get("title", ""), h.get("href", ""), h.get("body", "")) for h in hits]
