"""Route a task to the worker whose name and description best overlap it (no LLM involved)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerInfo:
    """What the router knows about a worker: its name and its description."""

    name: str
    description: str


_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK_STOP = re.compile(r"[的和与及或请吗呢吧啊把]")
_VOWEL = re.compile(r"[aeiouy]")
_STOP_TEXT = (
    "a an the and or of on in to for with by at from as is are was were be been being it its "
    "this that these those i me my you your we our us they them their he she his her not no but "
    "if so do does did can could would should will shall may might must please about into than "
    "then also some any all each every how what which who whom why when where there here just "
    "very too more most first finally next after before while have has had am let want need "
    "etc"
)
_STOP_WORDS = frozenset(_STOP_TEXT.split())
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


def stem(word: str) -> str:
    """Light, deterministic English stemming: plural, ``-ing``/``-ed`` and a final ``e``."""
    if len(word) <= 3 or not word.isalpha():
        return word
    word = _strip_plural(word)
    for suffix in ("ing", "ed"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= 3 and _VOWEL.search(base):
            word = base
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # debugging -> debugg -> debug
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _strip_plural(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercase tokens: stemmed English words without stop words, and CJK runs as bigrams.

    A CJK run is first cut at a few function characters (的, 和, 与, ...); each piece then
    yields its overlapping bigrams ("数据库安全" -> 数据, 据库, 库安, 安全), or itself when it
    is a single character.
    """
    tokens: list[str] = []
    for run in _TOKEN.findall(text.lower()):
        if run.isascii():
            if run not in _STOP_WORDS:
                tokens.append(stem(run))
            continue
        for piece in _CJK_STOP.split(run):
            if len(piece) == 1:
                tokens.append(piece)
            tokens.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return tokens


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
