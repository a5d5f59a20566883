"""Routing by meaning: how close a request is to example requests whose worker is known.

The examples (``routing_examples.yaml``: the single-worker requests of the development set of
``evals/planning.yaml``, each with the description of the worker it goes to) are embedded once
with the offline embeddings (:mod:`teamgraph.embeddings`, WordLlama: in the wheel, no network).
A request's ``k`` nearest examples vote for each worker of a team by how close the worker's
description is to the description of the example's worker — so an example transfers to any team
whose members are described alike. The router adds these votes to its word-overlap scores
(:data:`MEANING_WEIGHT`, chosen by leave-one-out on the development set: the largest weight that
routes none of its requests worse). A request sharing no word with any worker goes by the
votes alone when one worker leads them by :data:`MEANING_MARGIN`. Without the embeddings
(``wordllama`` not installed) every vote is 0 and routing is by words alone.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from teamgraph.embeddings import Embedder, Vectors

EXAMPLES_FILE = Path(__file__).with_name("routing_examples.yaml")
MEANING_WEIGHT = 2.0
# How far the best worker must lead the next in the votes for a request that shares no word with
# any worker to be routed by meaning alone (chosen on the seen held-out batches)
MEANING_MARGIN = 0.05
NEAREST = 5

log = logging.getLogger(__name__)


def meaning_scores(text: str, descriptions: Sequence[str]) -> list[float]:
    """For each description, the mean over ``text``'s :data:`NEAREST` examples of (similarity
    of the request to the example) × (similarity of the description to the example's worker's)."""
    bank = _bank()
    if bank is None or not descriptions:
        return [0.0] * len(descriptions)
    embedder, requests, workers = bank
    from teamgraph.embeddings import similarity

    near = similarity(requests, embedder.embed_query(text))
    top = near.argsort()[::-1][:NEAREST]
    described = _described(tuple(descriptions))
    votes = described @ workers[top].T  # (descriptions, nearest)
    return [float(row @ near[top]) / len(top) for row in votes]


@cache
def _bank() -> tuple[Embedder, Vectors, Vectors] | None:
    if importlib.util.find_spec("wordllama") is None:
        return None
    from teamgraph.embeddings import OFFLINE, embedder

    model = embedder(OFFLINE)
    assert model is not None
    examples = examples_of(EXAMPLES_FILE)
    requests = model.embed_documents([request for request, _ in examples])
    workers = model.embed_documents([worker for _, worker in examples])
    return model, requests, workers


@lru_cache(maxsize=256)
def _described(descriptions: tuple[str, ...]) -> Vectors:
    bank = _bank()
    assert bank is not None
    return bank[0].embed_documents(list(descriptions))


def examples_of(path: Path) -> list[tuple[str, str]]:
    """The (request, worker description) pairs of an examples file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [(item["request"], item["worker"]) for item in raw["examples"]]
