"""The offline model's comparison answer: per aspect, what the material says of each entity,
a verdict, then a table of the verdicts and a conclusion.

It has no understanding: a cell is the sentence of the material that names the entity and the
aspect (in the sentence or in the heading it sits under), a verdict weighs cue words of those
sentences ("faster", "permissive", "built-in" against "not enforced", "Enterprise only",
"costly"). The answer says so, and cites where each sentence comes from. Every entity of the
request has its column — "no passage found" rather than a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from teamgraph.llm._extractive import (
    OFFLINE_NOTICE,
    Source,
    content_terms,
    sentences,
    translated,
)
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


@dataclass(frozen=True)
class Verdict:
    """An aspect's verdict: the entities ahead (``ahead``), none (a tie), or too little material
    (``missing``: the entities without a passage)."""

    ahead: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        return bool(self.ahead)


@dataclass(frozen=True)
class Words:
    """The answer's own words, in the request's language (the quoted sentences stay as written)."""

    none: str
    verdict: str
    glance: str
    aspect: str
    conclusion: str
    missing: str  # {entities}
    tie: str
    ahead: str  # {entities}
    favours: str  # {wins}
    win: str  # {entity} {aspects}
    wins_sep: str
    unsettled: str  # {aspects}
    no_winner: str  # {entities}
    caveat: str
    joiner: str  # between entities: "and"
    comma: str
    space: str  # between sentences


ENGLISH = Words(
    none="no passage found.",
    verdict="Verdict",
    glance="At a glance",
    aspect="aspect",
    conclusion="Conclusion",
    missing="not enough material on {entities} to compare",
    tie="no clear difference in the material",
    ahead="{entities} ahead on what the material says",
    favours="The material favours {wins}.",
    win="{entity} on {aspects}",
    wins_sep="; ",
    unsettled="It does not settle {aspects}.",
    no_winner="It shows no clear winner between {entities}.",
    caveat="These verdicts weigh cue words of the quoted sentences (the offline model has no "
    "understanding): read the cited passages, and weigh what matters for your use, before "
    "choosing.",
    joiner=" and ",
    comma=", ",
    space=" ",
)
CHINESE = Words(
    none="未找到相关段落。",
    verdict="判断",
    glance="一览",
    aspect="方面",
    conclusion="结论",
    missing="关于 {entities} 的材料不足，无法比较",
    tie="材料中看不出明显差别",
    ahead="依材料，{entities} 占优",
    favours="材料显示：{wins}。",
    win="{entity}在{aspects}方面占优",
    wins_sep="；",
    unsettled="材料未能说明{aspects}方面的差别。",
    no_winner="{entities} 之间看不出明显的胜者。",
    caveat="以上判断只依据引文中的提示词（离线模型并不理解内容）：请阅读所引段落，"
    "结合你的实际需求再做选择。",
    joiner=" 和 ",
    comma="、",
    space="",
)


def comparison_answer(comparison: Comparison, sources: list[Source]) -> str:
    """Per aspect (or one overview), each entity's best sentence and a verdict; then a table of
    the verdicts and a conclusion — in the request's language."""
    words = CHINESE if comparison.chinese else ENGLISH
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
            said = f"{cell.sentence} _({cell.label})_" if cell else words.none
            lines.append(f"- **{entity}**: {said}")
        lines.append(f"- *{words.verdict}*: {_said(verdict, words)}")
        sections.append("\n".join(lines))
    table = [f"| {words.aspect} | " + " | ".join(entities) + f" | {words.verdict.lower()} |"]
    table.append("|---" * (len(entities) + 2) + "|")
    for aspect, verdict in verdicts:
        marks = ["✓" if entity in verdict.ahead else "–" for entity in entities]
        table.append(f"| {aspect} | " + " | ".join(marks) + f" | {_said(verdict, words)} |")
    notice = OFFLINE_NOTICE.format(n=len(sources))
    return "\n\n".join(
        [
            notice,
            f"## {' vs '.join(entities)}",
            *sections,
            f"### {words.glance}\n\n" + "\n".join(table),
            f"### {words.conclusion}\n\n" + _conclusion(entities, verdicts, words),
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
    named, about = content_terms(entity), content_terms(f"{aspect} {translated(aspect)}")
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


def _verdict(cells: dict[str, Cell | None]) -> Verdict:
    leans = {e: c.lean for e, c in cells.items() if c is not None}
    if len(leans) < 2:
        return Verdict(missing=tuple(e for e, c in cells.items() if c is None))
    top = max(leans.values())
    ahead = tuple(e for e, lean in leans.items() if lean == top)
    return Verdict() if len(ahead) == len(leans) else Verdict(ahead=ahead)


def _said(verdict: Verdict, words: Words) -> str:
    if verdict.missing:
        return words.missing.format(entities=words.comma.join(verdict.missing))
    if not verdict.ahead:
        return words.tie
    return words.ahead.format(entities=words.joiner.join(verdict.ahead))


def _conclusion(entities: list[str], verdicts: list[tuple[str, Verdict]], words: Words) -> str:
    wins = {e: [a for a, v in verdicts if e in v.ahead] for e in entities}
    said = [words.win.format(entity=e, aspects=words.comma.join(a)) for e, a in wins.items() if a]
    open_ = [a for a, v in verdicts if not v.settled]
    parts = []
    if said:
        parts.append(words.favours.format(wins=words.wins_sep.join(said)))
    if open_:
        parts.append(words.unsettled.format(aspects=words.comma.join(open_)))
    if not said:
        parts.append(words.no_winner.format(entities=words.joiner.join(entities)))
    parts.append(words.caveat)
    return words.space.join(parts)


def _short(line: str) -> str:
    return line if len(line) <= _MAX_CELL else line[: _MAX_CELL - 1].rstrip() + "…"
