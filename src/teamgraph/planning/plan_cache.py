"""The plan cache: a request similar enough to one a team's planner model already planned for
the same owner reuses that plan, with the new request's words in it, instead of asking the
model again.

What is cached: a plan the planner *model* made (tier ``llm``) and the rules of
:mod:`teamgraph.plan` accepted — never a template's, the rules' or an explicit plan (they cost no
model call). It is kept as a skeleton (:mod:`teamgraph.planning.plan_reuse`) with the vector
of its request, embedded by the one embedding service (:mod:`teamgraph.embeddings`, the team's
``embedding_model`` or the setting).

When it is reused — all of:

* same *key*: the team's whole spec, its templates, the planner's model and the embedding
  model (:func:`cache_key`) — a change to any of them and the old entries are never read again;
* same *owner* (the run's user): one user's requests never plan another user's run;
* cosine similarity of the two requests (their things and aspects masked) at least the
  threshold (the team's ``workflow.plan_cache.threshold``, else the ``plan_cache_threshold``
  setting);
* same *shape*: as many things, aspects and sequence parts;
* the filled plan obeys the team's plan rules, and none of the earlier request's own words is
  left in it (:func:`~teamgraph.planning.plan_reuse.leaked`).

Off for a team with ``workflow.plan_cache.enabled: false``, everywhere with the
``plan_cache`` setting false, and when the embedding model is ``none``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamgraph import embeddings
from teamgraph.config import Settings
from teamgraph.embeddings import Embedder
from teamgraph.plan import Plan, PlanRules
from teamgraph.planning.plan_reuse import embedding_text, fill, leaked, skeleton, words_of
from teamgraph.specs.team import TeamSpec
from teamgraph.storage.cached_plans import CacheEntry, PlanCacheStore

if TYPE_CHECKING:
    from teamgraph.embeddings import Vectors

FORMAT = 1  # of skeletons and keys: a new format reads no old entry


@dataclass(frozen=True)
class Scope:
    """Whose plans, for what: the team (with its templates), the planner's model, the owner."""

    team: TeamSpec
    templates: Mapping[str, Any]
    planner: str
    owner: str


@dataclass(frozen=True)
class Reuse:
    """A cached plan made fit for a new request, and how similar the two requests are."""

    plan: Plan
    similarity: float
    earlier: str  # the request it was planned for (the same owner's)


class PlanCache:
    """Lookups and writes of the plan cache, on a :class:`PlanCacheStore`."""

    def __init__(self, store: PlanCacheStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        # the request's vector, made once per run: by the lookup, or while the model plans
        self._vectors: dict[tuple[str, str], asyncio.Task[Vectors]] = {}

    def threshold(self, team: TeamSpec) -> float | None:
        """The similarity a reuse needs for ``team``; None when the cache is off for it."""
        options = team.workflow.plan_cache
        if not (self.settings.plan_cache and options.enabled):
            return None
        if self.embedder(team) is None:
            return None
        return (
            self.settings.plan_cache_threshold if options.threshold is None else options.threshold
        )

    def embedder(self, team: TeamSpec) -> Embedder | None:
        return embeddings.embedder(team.embedding_model, self.settings)

    async def lookup(self, scope: Scope, request: str, notes: list[str]) -> Reuse | None:
        """The best reusable plan for ``request``, or None (a near miss says why in
        ``notes``)."""
        threshold = self.threshold(scope.team)
        embedder = self.embedder(scope.team)
        if threshold is None or embedder is None:
            return None
        words = words_of(request)
        embedding = self._embedding(embedder, embedding_text(words))  # meanwhile: the read
        entries = await self.store.entries(cache_key(scope, embedder.name), scope.owner)
        if not entries:
            return None  # the vector is made while the model plans, for the write after it
        vector = await embedding
        rules = PlanRules(tuple(m.name for m in scope.team.members), scope.team.workflow.max_steps)
        described = " ".join(f"{m.name} {m.description}" for m in scope.team.members)
        for similarity, entry in _ranked(entries, vector):
            if similarity < threshold:
                break
            earlier = words_of(entry.request)
            if earlier.shape != words.shape:
                continue
            plan = fill(entry.skeleton, words)
            errors = rules.errors(plan)
            foreign = leaked(plan, entry.request, request, described)
            if not errors and not foreign:
                return Reuse(plan, similarity, entry.request)
            why = "; ".join(errors) or f"it would keep the words {', '.join(foreign)}"
            notes.append(f"a cached plan (similarity {similarity:.2f}) was not reused: {why}")
        return None

    async def remember(self, scope: Scope, request: str, plan: Plan) -> None:
        """Keep the plan the planner model made for ``request``."""
        if self.threshold(scope.team) is None:
            return
        embedder = self.embedder(scope.team)
        if embedder is None:
            return
        words = words_of(request)
        vector = await self._embedding(embedder, embedding_text(words))
        key = cache_key(scope, embedder.name)
        entry = CacheEntry(
            # one entry per request (a run re-executed after a crash, a request asked again)
            id=hashlib.sha256(f"{key}\n{scope.owner}\n{words.request}".encode()).hexdigest(),
            team=scope.team.name,
            key=key,
            owner=scope.owner,
            request=words.request,
            vector=vector.astype("float32").tobytes(),
            skeleton=skeleton(plan, words),
            created_at=time.time(),
        )
        await self.store.add(entry, self.settings.plan_cache_size)

    def _embedding(self, embedder: Embedder, text: str) -> asyncio.Task[Vectors]:
        """The vector of ``text``, being made on a thread (the offline model's first use in a
        process loads it: up to a second or two, which the planner's model call hides)."""
        key = (embedder.name, text)
        if key not in self._vectors:
            task = asyncio.ensure_future(asyncio.to_thread(embedder.embed_query, text))
            task.add_done_callback(_retrieved)  # a failure nobody awaits is not logged as lost
            self._vectors[key] = task
        return self._vectors[key]


def _retrieved(task: asyncio.Task[Vectors]) -> None:
    if not task.cancelled():
        task.exception()


def cache_key(scope: Scope, embedding_model: str) -> str:
    """A digest of everything a cached plan depends on: the team's spec (its workers, options,
    everything), its templates, the planner's and the embedding model."""
    parts = {
        "format": FORMAT,
        "team": scope.team.model_dump(mode="json"),
        "templates": {
            name: _dumped(template) for name, template in sorted(scope.templates.items())
        },
        "planner": scope.planner,
        "embeddings": embedding_model,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dumped(template: Any) -> Any:
    dump = getattr(template, "model_dump", None)
    return dump(mode="json") if dump else repr(template)


def _ranked(entries: list[CacheEntry], vector: Vectors) -> list[tuple[float, CacheEntry]]:
    """Entries by similarity of their request to ``vector``, highest first."""
    import numpy as np

    usable = [e for e in entries if len(e.vector) == vector.nbytes]
    if not usable:
        return []
    rows = np.frombuffer(b"".join(e.vector for e in usable), dtype=np.float32)
    scores = embeddings.similarity(rows.reshape(len(usable), -1), vector)
    order = np.argsort(-scores, kind="stable")
    return [(float(scores[i]), usable[i]) for i in order]
