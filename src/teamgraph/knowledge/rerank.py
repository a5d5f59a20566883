"""Reranking: the team's model puts the passages a search found in order of how well they
answer the question (a team's ``rerank: true``; off by default).

The search fetches twice as many passages as it returns (at most :data:`CANDIDATES`), the model
is shown the question and the numbered passages and answers with the numbers, best first
(``[3, 1, 2]``, or the numbers in any text); the passages it names come first in its order, the
others after them in the search's own order, and the first ``k`` are returned. A reply with no
usable number, or a failed call, leaves the search's order as it was. The offline model does not
rerank (it has no reading of its own to add): with it a search costs what it did.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from teamgraph.knowledge.index import Hit

CANDIDATES = 10  # passages shown to the model at most
PASSAGE_CHARS = 500  # of each passage
H = TypeVar("H", bound=Hit)
Ask = Callable[[str], Awaitable[str]]  # the model's answer to a prompt

INSTRUCTIONS = (
    "You rank passages by how well they answer a question. Reply with the passage numbers, "
    "best first, as a JSON list (e.g. [3, 1, 2]); leave out passages that do not help."
)


def candidates(k: int) -> int:
    """How many passages a search fetches for a reranked answer of ``k``."""
    return max(k, min(2 * k, CANDIDATES))


def prompt(question: str, hits: Sequence[Hit]) -> str:
    blocks = [f"[{n}] {_passage(hit)}" for n, hit in enumerate(hits, start=1)]
    return f"Question: {question}\n\nPassages:\n\n" + "\n\n".join(blocks)


def reorder(hits: Sequence[H], reply: str, k: int) -> list[H]:
    """``hits`` in the order ``reply`` names them (numbers from 1; unknown or repeated numbers
    ignored), the rest after them as they were; the first ``k``."""
    named: list[int] = []
    for number in (int(n) for n in re.findall(r"\d+", reply)):
        if 1 <= number <= len(hits) and number - 1 not in named:
            named.append(number - 1)
    rest = [i for i in range(len(hits)) if i not in named]
    return [hits[i] for i in [*named, *rest][:k]]


async def rerank(question: str, hits: Sequence[H], k: int, ask: Ask) -> list[H]:
    """The best ``k`` of ``hits`` as the model orders them (one call; none for one hit)."""
    if len(hits) < 2:
        return list(hits[:k])
    return reorder(hits, await ask(prompt(question, hits)), k)


def _passage(hit: Hit) -> str:
    text = " ".join(hit.text.split())
    text = text if len(text) <= PASSAGE_CHARS else text[:PASSAGE_CHARS] + " …"
    return f"{hit.heading}: {text}" if hit.heading else text
