"""A plan made for one request, made fit for another: the words a request brings to its plan
(the request itself, the things it compares and what it compares them on) become slots, and a
similar request's words fill them.

* :func:`words_of` — a request's words and its *shape* (how many things, how many aspects, how
  many parts of a sequence); a plan is only reused for a request of the same shape;
* :func:`embedding_text` — what the request is embedded as: its things and aspects replaced by
  one neutral word, so "Compare Redis and Memcached" is near "Compare Kafka and RabbitMQ";
* :func:`skeleton` / :func:`fill` — the plan with slots, and the plan for the new words;
* :func:`leaked` — the earlier request's own words still in the filled plan, which the new
  request does not have and the team's members do not describe: such a plan is not reused
  (a cached plan never brings one request's words into another request's run).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from teamgraph.plan import Plan
from teamgraph.planning.request_structure import parse_comparison, split_sequence
from teamgraph.text import search_terms

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
