"""The offline model's comparison answer: per aspect, what the material says of each entity,
a verdict, then a table of the verdicts and a conclusion.

It has no understanding: a cell is the sentence of the material that names the entity and the
aspect (in the sentence or in the heading it sits under), a verdict weighs cue words of those
sentences ("faster", "permissive", "built-in" against "not enforced", "Enterprise only",
"costly"). The answer says so, and cites where each sentence comes from. Every entity of the
request has its column — "no passage found" rather than a silent gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, content_terms, sentences
from teamgraph.planning.request_structure import Comparison
from teamgraph.text import tokenize

_GOOD = frozenset(
    tokenize(
        "fast faster fastest quick efficient scale scales scalable strong stronger secure "
        "built-in builtin free open-source permissive cheap cheaper low lower mature reliable "
        "durable durability flexible simple easy easier better best robust supports included "
        "encrypted default"
    )
)
_BAD = frozenset(
    tokenize(
        "slow slower costly expensive pricey only not lacks lack limited risk risky weak "
        "complex harder hard difficult requires needs enterprise paid vulnerable unless must "
        "overhead worse licence-fee fee fees extra"
    )
)
_MAX_CELL = 260


@dataclass(frozen=True)
class Cell:
    sentence: str
    label: str

    @property
    def lean(self) -> int:
        """Cue words for minus cue words against."""
        terms = tokenize(self.sentence)
        return sum(t in _GOOD for t in terms) - sum(t in _BAD for t in terms)


def comparison_answer(comparison: Comparison, sources: list[Source]) -> str:
    """Per aspect (or one overview), each entity's best sentence and a verdict; then a table of
    the verdicts and a conclusion."""
    entities = list(comparison.entities)
    aspects = list(comparison.aspects) or [_overview(comparison)]
    found = [(s.label, line) for s in sources for line in sentences(s.text)]
    used: set[str] = set()
    sections, verdicts = [], []
    for aspect in aspects:
        on = "" if not comparison.aspects else aspect  # an overview: anything on the entity
        cells = {e: _cell(e, on, entities, found, used) for e in entities}
        verdict = _verdict(cells)
        verdicts.append((aspect, verdict))
        lines = [f"### {aspect[:1].upper()}{aspect[1:]}"]
        for entity, cell in cells.items():
            said = f"{cell.sentence} _({cell.label})_" if cell else "no passage found."
            lines.append(f"- **{entity}**: {said}")
        lines.append(f"- *Verdict*: {verdict}")
        sections.append("\n".join(lines))
    table = ["| aspect | " + " | ".join(entities) + " | verdict |"]
    table.append("|---" * (len(entities) + 2) + "|")
    for aspect, verdict in verdicts:
        marks = [_mark(entity, verdict) for entity in entities]
        table.append(f"| {aspect} | " + " | ".join(marks) + f" | {verdict} |")
    notice = OFFLINE_NOTICE.format(n=len(sources))
    return "\n\n".join(
        [
            notice,
            f"## {' vs '.join(entities)}",
            *sections,
            "### At a glance\n\n" + "\n".join(table),
            "### Conclusion\n\n" + _conclusion(entities, verdicts),
        ]
    )


def _overview(comparison: Comparison) -> str:
    return "总体" if comparison.chinese else "overview"


def _cell(
    entity: str, aspect: str, entities: list[str], found: list[tuple[str, str]], used: set[str]
) -> Cell | None:
    """The sentence that best speaks of ``entity`` on ``aspect`` (not one quoted already, and
    rather one about no other entity): both named in it or in its heading, else the entity
    alone (``aspect`` empty: an overview)."""
    named, about = content_terms(entity), content_terms(aspect)
    others = set().union(*(content_terms(e) for e in entities if e != entity)) - named
    best: tuple[tuple[int, int, int], Cell] | None = None
    for position, (label, line) in enumerate(found):
        if line in used:
            continue
        terms = content_terms(line)
        where = terms | content_terms(label)
        if not named or not named & where:
            continue
        on_aspect = len(about & where) if about else 0
        if about and not on_aspect and aspect not in line:
            continue
        score = (on_aspect + bool(aspect and aspect in line), -len(others & terms), -position)
        if best is None or score > best[0]:
            best = (score, Cell(_short(line), label))
    if best is None:
        return None
    used.add(best[1].sentence)
    return best[1]


def _verdict(cells: dict[str, Cell | None]) -> str:
    leans = {e: c.lean for e, c in cells.items() if c is not None}
    if len(leans) < 2:
        missing = [e for e, c in cells.items() if c is None]
        return f"not enough material on {', '.join(missing)} to compare"
    top = max(leans.values())
    ahead = [e for e, lean in leans.items() if lean == top]
    if len(ahead) == len(leans):
        return "no clear difference in the material"
    return f"{' and '.join(ahead)} ahead on what the material says"


def _mark(entity: str, verdict: str) -> str:
    if verdict.startswith("no ") or verdict.startswith("not "):
        return "–"
    return "✓" if re.search(rf"(?:^| and ){re.escape(entity)}(?: and | ahead)", verdict) else "–"


def _conclusion(entities: list[str], verdicts: list[tuple[str, str]]) -> str:
    wins = {e: [a for a, v in verdicts if _mark(e, v) == "✓"] for e in entities}
    said = [f"{e} on {', '.join(a)}" for e, a in wins.items() if a]
    open_ = [a for a, v in verdicts if v.startswith(("no ", "not "))]
    parts = []
    if said:
        parts.append("The material favours " + "; ".join(said) + ".")
    if open_:
        parts.append(f"It does not settle {', '.join(open_)}.")
    if not said:
        parts.append(f"It shows no clear winner between {' and '.join(entities)}.")
    parts.append(
        "These verdicts weigh cue words of the quoted sentences (the offline model has no "
        "understanding): read the cited passages, and weigh what matters for your use, before "
        "choosing."
    )
    return " ".join(parts)


def _short(line: str) -> str:
    return line if len(line) <= _MAX_CELL else line[: _MAX_CELL - 1].rstrip() + "…"
