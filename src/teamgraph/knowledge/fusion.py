"""Hybrid ranking: keyword (BM25) and vector results fused by reciprocal rank.

Each list gives a passage ``1 / (RRF_K + rank)`` (rank from 1); a passage found by both adds
both. A keyword hit counts in proportion to the share of the question's terms it holds
(*coverage*): a passage matching one common word of a question that shares no word with its
answer (a paraphrase) weighs little, one matching every term of a keyword question weighs fully.
Plain reciprocal rank fusion lets such one-word matches push the passages found by meaning out
of the first five; coverage keeps keyword questions as good as keyword search alone and
paraphrases as good as vector search alone (evals/retrieval.py measures both).

``RRF_K`` is 10 rather than the customary 60: with lists of twenty, a smaller constant keeps the
difference between the first and the fifth place worth something. Both values were chosen on
the development set of the retrieval eval, never on its held-out set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from teamgraph.text import tokenize

RRF_K = 10


def fuse(
    keyword: Sequence[int], vector: Sequence[int], coverage: Mapping[int, float]
) -> list[tuple[int, float]]:
    """Chunk ids of both lists (each best first) in fused order, with their fused scores."""
    scores: dict[int, float] = {}
    for rank, chunk in enumerate(keyword, start=1):
        scores[chunk] = scores.get(chunk, 0.0) + coverage.get(chunk, 0.0) / (RRF_K + rank)
    for rank, chunk in enumerate(vector, start=1):
        scores[chunk] = scores.get(chunk, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def coverage(query: str, passages: Iterable[tuple[int, str]]) -> dict[int, float]:
    """For each (chunk id, text): the share of the query's terms (stemmed words, CJK bigrams)
    found in the text."""
    wanted = set(tokenize(query))
    if not wanted:
        return {}
    return {chunk: len(wanted & _terms(text)) / len(wanted) for chunk, text in passages}


@lru_cache(maxsize=1 << 14)  # a passage's terms, computed once however often it is a candidate
def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))
