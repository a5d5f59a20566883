"""Reranking of search_docs' passages by the team's model (off by default; never with the
offline model), with a scripted model in its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage

from teamgraph.config import Settings
from teamgraph.knowledge import KnowledgeBase
from teamgraph.knowledge.rerank import candidates, prompt, reorder
from teamgraph.testing import FunctionChatModel, ToolCall, current_brief
from teamgraph.tools.search_docs import make_search_docs_tool

from .helpers import by_type, make_team, member

SECTIONS = {
    "cache.md": "# Caching\nRedis keeps hot keys in memory for fast reads.",
    "persist.md": "# Persistence\nRedis writes RDB snapshots and an append-only file to disk.",
    "queue.md": "# Queues\nRedis lists and streams can serve as a message queue.",
}


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in SECTIONS.items():
        (docs / name).write_text(text, encoding="utf-8")
    base = KnowledgeBase(tmp_path / "kb.db", Settings(embedding_model="none"))
    base.ingest([docs])
    return base


def headings(answer: str) -> list[str]:
    return [line.split(" — ")[1] for line in answer.splitlines() if line.startswith("[")]


def test_the_reply_orders_the_passages_and_the_rest_follow() -> None:
    hits = ["a", "b", "c", "d"]
    assert reorder(hits, "[3, 1]", 4) == ["c", "a", "b", "d"]
    assert reorder(hits, "Passage 2 is best, then 2 again, then 9 and 4.", 2) == ["b", "d"]
    assert reorder(hits, "none of them", 3) == ["a", "b", "c"]
    assert candidates(5) == 10 and candidates(3) == 6 and candidates(12) == 12


async def test_search_docs_returns_the_models_order(kb: KnowledgeBase) -> None:
    asked: list[str] = []

    async def ask(text: str) -> str:
        asked.append(text)
        return "[3, 2, 1]"

    plain = await make_search_docs_tool(kb, k=3).ainvoke({"query": "Redis"})
    reranked = await make_search_docs_tool(kb, k=3, rerank=ask).ainvoke({"query": "Redis"})
    assert len(asked) == 1 and asked[0].startswith("Question: Redis")
    assert headings(str(reranked)) == headings(str(plain))[::-1]


async def test_a_failed_reranking_keeps_the_searchs_order(kb: KnowledgeBase) -> None:
    async def ask(text: str) -> str:
        raise ValueError("the model is confused")

    plain = await make_search_docs_tool(kb, k=2).ainvoke({"query": "Redis"})
    reranked = await make_search_docs_tool(kb, k=2, rerank=ask).ainvoke({"query": "Redis"})
    assert reranked == plain


def test_the_prompt_numbers_each_passage(kb: KnowledgeBase) -> None:
    hits = kb.search("Redis", 3)
    text = prompt("Redis?", hits)
    for n, hit in enumerate(hits, start=1):
        assert f"[{n}] {hit.heading}: {' '.join(hit.text.split())}" in text


def researcher_model(reranks: list[str]) -> FunctionChatModel:
    """The team's model: the researcher searches once then answers with what the tool said;
    as the reranker it puts the last passage first."""

    def fn(messages: list[BaseMessage]) -> Any:
        brief = current_brief()
        if brief is not None and brief.role == "reranker":
            reranks.append(str(messages[-1].content))
            return "[3]"
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return str(results[-1].content) if results else ToolCall("search_docs", {"query": "Redis"})

    return FunctionChatModel(fn=fn)


async def test_a_team_with_rerank_asks_its_model_once_per_search(
    settings: Settings, tmp_path: Path, kb: KnowledgeBase
) -> None:
    reranks: list[str] = []
    docs = tmp_path / "docs"
    team = make_team(
        settings,
        member("researcher", "finds facts", tools=["search_docs"]),
        pattern="single",
        knowledge=[str(docs)],
        rerank=True,
        model=researcher_model(reranks),
    )
    async with team.runner() as runner:
        events = [e async for e in runner.stream("Redis?", run_id="run-1")]
        result = await runner.result("run-1")
    assert len(reranks) == 1
    plain = make_search_docs_tool(
        KnowledgeBase(settings.sqlite_path, settings).scoped(["team:t"]), k=5
    )
    first = headings(str(await plain.ainvoke({"query": "Redis"})))
    assert headings(result.output)[0] == first[2]  # the model's pick first, the rest after
    assert sorted(headings(result.output)) == sorted(first)
    charged = [e for e in by_type(events, "usage") if e.agent == "reranker"]
    assert len(charged) == 1


async def test_without_rerank_or_on_the_offline_model_no_model_reranks(
    settings: Settings, tmp_path: Path, kb: KnowledgeBase
) -> None:
    reranks: list[str] = []
    docs = tmp_path / "docs"
    for model, rerank in ((researcher_model(reranks), False), (None, True)):
        team = make_team(
            settings,
            member("researcher", "finds facts", tools=["search_docs"]),
            pattern="single",
            knowledge=[str(docs)],
            rerank=rerank,
            model=model,
        )
        async with team.runner() as runner:
            events = [e async for e in runner.stream("Redis?", run_id=f"run-{rerank}")]
        assert not [e for e in by_type(events, "usage") if e.agent == "reranker"]
    assert reranks == []
