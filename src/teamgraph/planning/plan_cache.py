"""The plan cache: a request similar enough to one a team's planner model already planned for
the same owner reuses that plan, with the new request's words in it, instead of asking the
model again.

What is cached: a plan the planner *model* made (tier ``llm``) and the rules of
:mod:`teamgraph.plan` accepted — never a template's, the rules' or an explicit plan (they cost no
model call). It is kept as a skeleton (below) with the vector
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
  left in it (:func:`leaked`).

Off for a team with ``workflow.plan_cache.enabled: false``, everywhere with the
``plan_cache`` setting false, and when the embedding model is ``none``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamgraph import embeddings
from teamgraph.config import Settings
from teamgraph.embeddings import Embedder
from teamgraph.plan import Plan, PlanRules
from teamgraph.planning.request_structure import parse_comparison, split_sequence
from teamgraph.specs.team import TeamSpec
from teamgraph.storage.cached_plans import CacheEntry, PlanCacheStore
from teamgraph.text import search_terms

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


# --- plan reuse --------------------------------------------------------------------------------
# A plan made for one request, made fit for another: the words a request brings to its plan (the
# request itself, the things it compares and what it compares them on) become slots, and a similar
# request's words fill them.
#
# * :func:`words_of` — a request's words and its *shape* (how many things, how many aspects, how
# many parts of a sequence); a plan is only reused for a request of the same shape; *
# :func:`embedding_text` — what the request is embedded as: its things and aspects replaced by one
# neutral word, so "Compare Redis and Memcached" is near "Compare Kafka and RabbitMQ"; *
# :func:`skeleton` / :func:`fill` — the plan with slots, and the plan for the new words; *
# :func:`leaked` — the earlier request's own words still in the filled plan, which the new request
# does not have and the team's members do not describe: such a plan is not reused (a cached plan
# never brings one request's words into another request's run).
NEUTRAL = "thing"  # what a request's things and aspects are embedded as
_REQUEST = "\u27e6request\u27e7"  # ⟦request⟧, ⟦e0⟧, ⟦a0⟧, ⟦s0⟧: no request holds these


@dataclass(frozen=True)
class Words:
    """What one request brings to its plan."""

    request: str
    entities: tuple[str, ...] = ()
    aspects: tuple[str, ...] = ()
    parts: int = 1  # steps of a sequence ("first …, then …")

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.entities), len(self.aspects), self.parts

    def slots(self) -> list[tuple[str, str, bool]]:
        """(slot, value, whether it is an id slug) — longest values first when replacing."""
        out = [(_REQUEST, self.request, False)]
        out += [(f"\u27e6e{i}\u27e7", e, False) for i, e in enumerate(self.entities)]
        out += [(f"\u27e6a{i}\u27e7", a, False) for i, a in enumerate(self.aspects)]
        out += [(f"\u27e6s{i}\u27e7", _slug(e, i), True) for i, e in enumerate(self.entities)]
        return out


def words_of(request: str) -> Words:
    request = request.strip()
    comparison = parse_comparison(request)
    parts = max(1, len(split_sequence(request)))
    if comparison is None:
        return Words(request, parts=parts)
    return Words(request, comparison.entities, comparison.aspects, parts)


def embedding_text(words: Words) -> str:
    text = words.request
    for value in sorted((*words.entities, *words.aspects), key=len, reverse=True):
        text = _pattern(value).sub(NEUTRAL, text)
    return text


def skeleton(plan: Plan, words: Words) -> str:
    """``plan`` as JSON with ``words`` replaced by their slots."""
    slots = sorted(words.slots(), key=lambda slot: len(slot[1]), reverse=True)

    def cut(text: str, ids: bool) -> str:
        for slot, value, is_slug in slots:
            if value and is_slug == ids:
                text = (_slug_pattern(value) if ids else _pattern(value)).sub(slot, text)
        return text

    return json.dumps(_mapped(plan.to_dict(), cut))


def fill(saved: str, words: Words) -> Plan:
    """The plan of :func:`skeleton` with ``words`` in its slots."""
    slots = words.slots()

    def put(text: str, _ids: bool) -> str:
        for slot, value, _ in slots:
            text = text.replace(slot, value)
        return text

    return Plan.from_dict(_mapped(json.loads(saved), put))


def leaked(plan: Plan, earlier: str, now: str, described: str) -> list[str]:
    """The terms of ``earlier`` (the request the plan was made for) found in ``plan`` that are
    neither in ``now`` nor in ``described`` (the team's members and their descriptions)."""
    foreign = set(search_terms(earlier)) - set(search_terms(now)) - set(search_terms(described))
    if not foreign:
        return []
    texts = [plan.name, plan.reasoning, *plan.entities, *plan.aspects]
    for step in plan.steps:
        texts += [step.id.replace("_", " "), step.task]
    used = set(search_terms(" ".join(texts)))
    return sorted(foreign & used)


def _mapped(plan: dict[str, Any], change: Any) -> dict[str, Any]:
    """``plan`` (its dict form) with ``change(text, ids)`` applied to every text it holds; step
    ids and dependencies with ``ids=True``."""
    out = dict(plan)
    for field in ("name", "reasoning"):
        out[field] = change(str(plan.get(field, "")), False)
    for field in ("entities", "aspects"):
        out[field] = [change(str(item), False) for item in plan.get(field, [])]
    out["steps"] = [
        {
            **step,
            "id": change(str(step["id"]), True),
            "task": change(str(step["task"]), False),
            "depends_on": [change(str(dep), True) for dep in step.get("depends_on", [])],
        }
        for step in plan.get("steps", [])
    ]
    return out


def _pattern(value: str) -> re.Pattern[str]:
    """``value`` in any case; a Latin word not inside a longer one (beside a CJK character is
    beside no word: "Redis和Memcached")."""
    if not value.isascii():
        return re.compile(re.escape(value), re.I)
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", re.I)


def _slug_pattern(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9])")


def _slug(entity: str, i: int) -> str:
    """The id form of a thing: its ASCII slug, or ``item<n>``."""
    slug = re.sub(r"[^a-z0-9]+", "_", entity.lower()).strip("_")
    return slug if entity.isascii() and slug else f"item{i + 1}"
