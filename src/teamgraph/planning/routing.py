"""Route a task to the worker whose name and description best overlap it (no LLM involved)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teamgraph.text import tokenize


@dataclass(frozen=True)
class WorkerInfo:
    """What the router knows about a worker: its name and its description."""

    name: str
    description: str


_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("research", "find", "search", "look", "lookup", "gather", "investigate", "explore", "source",
     "fact", "evidence", "information", "调研", "研究", "查找", "搜索", "查询", "资料", "收集",
     "事实"),
    ("analyze", "analyse", "analysis", "compare", "comparison", "evaluate", "evaluation", "assess",
     "calculate", "compute", "measure", "differ", "difference", "versus", "vs", "tradeoff",
     "分析", "比较", "对比", "评估", "计算", "权衡"),
    ("write", "summarize", "summarise", "summary", "report", "draft", "overview", "总结", "报告",
     "撰写", "写作", "摘要", "概述", "汇总"),
    ("code", "implement", "implementation", "debug", "bug", "program", "programming", "script",
     "fix", "refactor", "function", "代码", "实现", "编程", "调试", "程序", "修复", "函数"),
    ("review", "check", "critique", "critic", "verify", "audit", "proofread", "validate", "error",
     "mistake", "审查", "检查", "评审", "审核", "校对", "验证"),
)  # fmt: skip


def _build_synonyms() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = {token for word in group for token in tokenize(word)}
        for token in stems:
            table.setdefault(token, set()).update(stems)
    return {token: frozenset(group) for token, group in table.items()}


_SYNONYMS = _build_synonyms()


def _score(text_tokens: set[str], described: set[str]) -> float:
    score = 0.0
    for token in text_tokens:
        if token in described:
            score += 1.0
        else:  # synonym-only: 0.25, 0.375, 0.4375, ... (always < 0.5) as more synonyms hit
            hits = len(_SYNONYMS.get(token, frozenset()) & described)
            score += 0.5 * (1 - 0.5**hits)
    return score


def overlap_score(text: str, description: str) -> float:
    """How well ``description`` covers ``text``: 1 per shared token, under 0.5 per token that
    only matches through synonyms (more for tokens whose synonyms hit the description often).

    Synonyms expand the text's tokens only (e.g. "调研" or "look" also counts as "research",
    "search", "gather", ...), so any description is scored by its own words.
    """
    return _score(set(tokenize(text)), set(tokenize(description)))


def route(text: str, workers: Sequence[WorkerInfo], default: str | None = None) -> str:
    """Name of the worker whose name + description best overlaps ``text``.

    Ties go to the earlier worker. Without any overlap: ``default`` if it names one of
    ``workers``, else the first worker. Raises :class:`ValueError` when ``workers`` is empty.
    """
    if not workers:
        raise ValueError("route() needs at least one worker")
    tokens = set(tokenize(text))
    best: str | None = None
    best_score = 0.0
    for worker in workers:
        score = _score(tokens, set(tokenize(f"{worker.name} {worker.description}")))
        if score > best_score:
            best, best_score = worker.name, score
    if best is not None:
        return best
    names = [w.name for w in workers]
    return default if default in names else names[0]
