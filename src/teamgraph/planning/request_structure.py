"""Find structure in a request: comparisons (entities and aspects) and ordered sequences."""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamgraph.text import has_cjk, simplified

_TRIM = " \t\r\n.,;:!?。，；：！？、\"'“”"
_MAX_ENTITY_WORDS = 5
_MAX_ENTITY_CHARS = 40

# --- comparisons -----------------------------------------------------------------------------
_EN_ASK = r"(?:(?:please|can you|could you|would you|help me|i want to|i'd like to|let's)\s+)*"
_EN_OPENERS = (  # each names its body: the entities, with the aspects before or after them
    re.compile(rf"^{_EN_ASK}(?:compare|contrast)\s+(?:between\s+)?(?P<body>.+)$", re.I | re.S),
    re.compile(r"\bdifferences?\s+between\s+(?P<body>.+)$", re.I | re.S),
    re.compile(r"\bpros\s+and\s+cons\s+of\s+(?P<body>.+)$", re.I | re.S),
    re.compile(
        r"\bhow\s+(?:does|do|did)\s+(?P<body>.+?\s+(?:compare|stack\s+up|differ)\s+"
        r"(?:to|with|against|from)\s+.+)$",
        re.I | re.S,
    ),
    re.compile(  # "Which is cheaper for a startup, AWS or GCP?"
        r"^(?:which|what)\b[^,:]*[,:]\s*(?P<body>[^,:]+?\s+or\s+[^:]+)$", re.I | re.S
    ),
    re.compile(  # "Should I use Kafka or RabbitMQ for ...?"
        r"^(?:should|shall|do|would)\s+(?:i|we)\s+(?:use|pick|choose|learn|buy|get|go\s+with|"
        r"adopt|rent|book|invest\s+in)\s+(?P<body>.+?\s+or\s+.+)$",
        re.I | re.S,
    ),
    re.compile(  # "React or Vue: which should I learn first?"
        r"^(?P<body>[^,:?]+?\s+or\s+[^,:?]+?)\s*[,:?]\s*which\b", re.I | re.S
    ),
)
_EN_VS = re.compile(r"\s(?:vs\.?|versus)\s", re.I)
_EN_ASPECT_MARK = re.compile(
    r"\s*[:：]\s*|\s+[—–-]{1,2}\s+|\s*[—–]\s*|\s+(?:on|in\s+terms\s+of|regarding|with\s+re(?:spect|gard)\s+to|across|"
    r"based\s+on|when\s+it\s+comes\s+to)\s+",
    re.I,
)
_EN_OF = re.compile(r"\s+(?:of|in|at)\s+", re.I)
_EN_ENTITY_SEP = re.compile(
    r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|with|to|vs\.?|versus|against|or|from|"
    r"compared\s+(?:to|with)|(?:compare|stack\s+up|differ)\s+(?:to|with|against|from)|"
    r"(?:better|worse|\w+er|more\s+\w+|less\s+\w+)\s+than)\s+",
    re.I,
)
_EN_ASPECT_SEP = re.compile(r"\s*[,;/&、，；]\s*(?:and\s+)?|\s+and\s+|\s*(?:和|与|及)\s*", re.I)
_EN_LEADING = re.compile(r"^(?:the|a|an|their|its|both|between|using|is|are)\s+", re.I)
# Words after an entity or aspect that set the scene rather than name it: "Amazon this year",
# "GCP for startups", "cost in 2025", "... and recommend one".
_EN_CONTEXT = re.compile(
    r"\s+(?:for|in|this|last|next|today|now|right\s+now|these\s+days|nowadays|when|if|as|at|"
    r"during|since|which|that|so|because|and\s+(?:recommend|tell|give|explain|suggest|say|"
    r"pick|decide|choose|help|list|write|summari[sz]e))\b.*$",
    re.I | re.S,
)

# Ways of asking for a comparison that say it in other words, rewritten to "compare ..." first:
# "Between A and B, which one handles X better?", "torn between A and B", "How do A and B differ
# in X?", "Is A faster than B for Z?", "A or B for Z?".
_EN_BETWEEN = re.compile(
    r"^between\s+(?P<entities>.+?)\s*[,:]\s*(?P<question>(?:which|what|where|who|how)\b.*)$",
    re.I | re.S,
)
_EN_WHICH_ASPECT = (  # the aspect a "which ..." question weighs the entities on
    re.compile(
        r"^(?:which|who)(?:\s+one|\s+of\s+(?:them|the\s+\w+))?\s+(?:is|has|have|offers?|gives?|"
        r"provides?|gets?)\s+(?:the\s+)?(?:better|best|more|stronger|lower|higher|cheaper|faster)\s+"
        r"(?!(?:for|in|on|at|to|with|when|if|as|than|during)\b)(?P<aspect>[\w -]+)$",
        re.I,
    ),
    re.compile(
        r"^(?:which|who)(?:\s+one|\s+of\s+(?:them|the\s+\w+))?\s+(?!is\b|are\b|should\b|would\b)"
        r"\w+\s+(?P<aspect>[\w -]+?)\s+(?:better|best|more\s+\w+|faster|well)$",
        re.I,
    ),
)
_EN_REWRITES = (
    (
        re.compile(
            r"\b(?:torn|choos(?:e|ing)|decid(?:e|ing)|pick(?:ing)?)\s+between\s+(?P<e>.+)$",
            re.I | re.S,
        ),
        "compare {e}",
    ),
    (
        re.compile(
            r"^how\s+(?:do|does|did)\s+(?P<e>.+?\s(?:and|&)\s.+?)\s+(?:differ|compare)"
            r"(?:\s+(?:in|on|when\s+it\s+comes\s+to|with\s+re(?:spect|gard)\s+to)\s+(?P<a>.+))?$",
            re.I | re.S,
        ),
        "compare {e} on {a}",
    ),
    (
        re.compile(
            r"^(?:is|are|was|were)\s+(?P<e>.+?\s+(?:better|worse|\w+er|more\s+\w+|less\s+\w+)\s+"
            r"than\s+.+)$",
            re.I | re.S,
        ),
        "compare {e}",
    ),
    (
        re.compile(
            r"^(?!(?:is|are|do|does|can|could|should|would|will|what|which|how|why|where|when|who|"
            r"write|make|find|give|tell|show|help|please|i|we|you|it|get|buy|use)\b)"
            r"(?P<e>[^\s,?:](?:[^,?:]{0,40}?,\s*){0,4}[^,?:]{0,40}?\s+or\s+[^,?:]{1,40}?)"
            r"(?P<z>\s+for\s+[^?]+)?\?$",
            re.I | re.S,
        ),
        "compare {e}{z}",
    ),
)
# A clause after the entities that asks for more than the comparison: "... and recommend one".
_EN_AND_VERB = re.compile(
    r"\s+and\s+(?:then\s+)?(?:recommend|tell|give|explain|suggest|say|pick|decide|choose|help|"
    r"list|write|summari[sz]e|advise|show|let)\b.*$",
    re.I | re.S,
)

_ZH_ASK = r"(?:请问|请|麻烦|帮我|帮忙|唔该|可唔可以|可以|你可以|能不能|能否|想)*"
_ZH_OPENERS = (
    re.compile(rf"^{_ZH_ASK}\s*(?:比较|对比|比对)(?:一下|下)?\s*(?P<body>.+)$", re.S),
    re.compile(
        rf"^{_ZH_ASK}\s*(?P<body>.+?)\s*(?:之间|两者|两个)?(?:有什么|有何|有哪些|有咩|有乜|有啲咩)?"
        r"(?:区别|差异|异同|不同|分别|差别|不一样|唔同|唔一样)",
        re.S,
    ),
    # "A和B的X、Y对比(一下)": the comparison word at the end
    re.compile(
        rf"^{_ZH_ASK}\s*(?P<body>.+?(?:和|与|跟|同|及|、|vs|VS).+?)\s*(?:之间)?(?:的|嘅)?"
        r"(?:对比|比较|比对|比拼|pk|PK)(?:一下|下)?\W*$",
        re.S,
    ),
    # "A还是B好？", "iPhone 定 Pixel 好？": which of two is better
    re.compile(
        rf"^{_ZH_ASK}\s*(?P<body>\S.*?(?:还是(?![不没很太挺有更])|定系|\s定\s).*?\S)\s*(?:哪个|边个)?\s*(?:更|比较)?"
        r"(?:好|好啲|好d|好D|适合|抵)\W*$",
        re.S,
    ),
    # "A还是B，哪个…": the entities are joined by a word ("找谁" after a clause compares nothing)
    re.compile(
        rf"^{_ZH_ASK}\s*(?P<body>.+?(?:和|与|跟|同|及|、|还是|或者|或|vs|VS).+?)\s*[，,]?\s*"
        r"(?:哪个|哪一个|哪款|哪家|边个|边款|边间|谁)",
        re.S,
    ),
)
_ZH_ASPECT_MARK = re.compile(r"\s*(?:的|在|喺|嘅)\s*")
_ZH_ENTITY_SEP = re.compile(
    r"\s*(?:以及|还是|定系|\s定\s|或者|和|与|跟|及|同|、|,|，|vs\.?|VS|versus)\s*"
)
_ZH_ASPECT_SEP = re.compile(r"\s*(?:以及|和|与|及|或|同|、|,|，|;|；|/)\s*")
_ZH_CLAUSE_END = re.compile(r"(?:并且|并|然后|再|。|？|\?|！|!).*$", re.S)
_ZH_ASPECT_TAIL = re.compile(
    r"(?:方面|上)?(?:之间)?(?:的|嘅)?(?:有什么|有何|有哪些|有咩|有乜|有啲咩)?"
    r"(?:差异|区别|异同|优劣|不同|分别|差别|表现|对比|比较)?$"
)
_ZH_CONTEXT = re.compile(
    r"(?:最近|今年|去年|近年|目前|现在|而家|近期|这几年|这两年|两者|两个|比起来|相比|相比之下|"
    r"比较起来|对比起来|比)+$"
)


@dataclass(frozen=True)
class Comparison:
    """Things to compare, the aspects to compare them on (may be empty), and the language."""

    entities: tuple[str, ...]
    aspects: tuple[str, ...]
    chinese: bool


def parse_comparison(text: str) -> Comparison | None:
    """The comparison ``text`` asks for, or None when it is not a comparison of 2+ things.

    Chinese is read in simplified characters; entities and aspects come back as written."""
    text = text.strip()
    chinese = has_cjk(text)
    parsed = _parse_chinese(simplified(text)) if chinese else None
    if parsed is not None:
        parsed = _as_written(text, simplified(text), parsed)
    else:
        parsed = _parse_english(text)
    if parsed is None:
        return None
    entities, aspects = parsed
    if len(entities) < 2 or len(set(entities)) < len(entities) or not all(map(_short, entities)):
        return None
    return Comparison(tuple(entities), tuple(aspects), chinese)


def _short(entity: str) -> bool:
    return len(entity.split()) <= _MAX_ENTITY_WORDS and len(entity) <= _MAX_ENTITY_CHARS


def _clean(parts: list[str], *cuts: re.Pattern[str]) -> list[str]:
    out: list[str] = []
    for part in parts:
        part = part.strip(_TRIM)
        for cut in cuts:
            part = cut.sub("", part).strip(_TRIM)
        if part and part.lower() != "etc" and part not in out:
            out.append(part)
    return out


def _rewritten(text: str) -> str:
    """``text`` with a comparison said in other words rewritten as "compare ..." (else as is)."""
    between = _EN_BETWEEN.match(text)
    if between:
        question = between.group("question").strip().rstrip(" ?!.")
        aspect = next((m for p in _EN_WHICH_ASPECT if (m := p.match(question))), None)
        on = f" on {aspect.group('aspect').strip()}" if aspect else ""
        return f"compare {between.group('entities')}{on}"
    for pattern, form in _EN_REWRITES:
        match = pattern.search(text)
        if match:
            values = {k: v or "" for k, v in match.groupdict().items()}
            return form.format(**values).removesuffix(" on ")
    return text


def _parse_english(text: str) -> tuple[list[str], list[str]] | None:
    text = _rewritten(text.strip()).rstrip(" ?!.")
    match = next((m for p in _EN_OPENERS if (m := p.search(text))), None)
    body = match.group("body") if match else (text if _EN_VS.search(text) else None)
    if body is None:
        return None
    body = _EN_AND_VERB.sub("", body)
    mark = _EN_ASPECT_MARK.search(body)
    if mark:
        entities, aspects = body[: mark.start()], body[mark.end() :]
    else:
        aspects, entities = _aspects_of(body.strip())
    if match is None:  # "..., A vs B": only the clause holding "vs" names the entities
        clauses = reversed(re.split(r"[,;?!]\s+", entities))
        entities = next((c for c in clauses if _EN_VS.search(c)), entities)
    return (
        _clean(_EN_ENTITY_SEP.split(entities), _EN_LEADING, _EN_CONTEXT),
        _clean(_EN_ASPECT_SEP.split(aspects), _EN_LEADING, _EN_CONTEXT),
    )


def _aspects_of(body: str) -> tuple[str, str]:
    """ "the cost of living in A and B": the aspects before the last "of"/"in"/"at" that is
    followed by two or more entities ("cost of living", "A and B"). Several aspects ("the cost
    and latency of A and B") only after "the": "A and B in X and Y" names no aspects."""
    cuts = [m for m in _EN_OF.finditer(body) if _EN_ENTITY_SEP.search(body[m.end() :])]
    if not cuts:
        return "", body
    aspects = body[: cuts[-1].start()]
    if _EN_ENTITY_SEP.search(aspects) and not re.match(r"the\s", aspects, re.I):
        return "", body
    return aspects, body[cuts[-1].end() :]


def _parse_chinese(text: str) -> tuple[list[str], list[str]] | None:
    match = next((m for p in _ZH_OPENERS if (m := p.match(text))), None)
    if match is None:
        return None
    body = _ZH_CLAUSE_END.sub("", match.group("body")).strip(_TRIM)
    parts = _ZH_ASPECT_MARK.split(body, maxsplit=1)
    aspects = _ZH_ASPECT_TAIL.sub("", parts[1].strip(_TRIM)) if len(parts) > 1 else ""
    return (
        _clean(_ZH_ENTITY_SEP.split(parts[0]), _ZH_CONTEXT),
        _clean(_ZH_ASPECT_SEP.split(aspects), _ZH_ASPECT_TAIL, _ZH_CONTEXT),
    )


def _as_written(
    original: str, converted: str, parsed: tuple[list[str], list[str]]
) -> tuple[list[str], list[str]]:
    return _written_as(original, converted, parsed[0]), _written_as(original, converted, parsed[1])


def _written_as(original: str, converted: str, items: list[str]) -> list[str]:
    """Items found in ``converted`` (the same length as ``original``) as ``original`` spells
    them, each searched after the one before."""
    out, at = [], 0
    for item in items:
        found = converted.find(item, at)
        if found < 0:
            found = converted.find(item)
        if found < 0:
            out.append(item)
            continue
        out.append(original[found : found + len(item)])
        at = found + len(item)
    return out


# --- sequences -------------------------------------------------------------------------------
_NUMBERED = re.compile(
    r"(?:\bstep\s*(\d{1,2})\s*[:：.)]?|(?<![A-Za-z0-9.])(\d{1,2})\s*[.)、](?!\d)"
    r"|(?<![\u4e00-\u9fff])([一二三四五六七八九十])\s*[、.．]|([①-⑩]))\s*",
    re.I,
)
_ZH_NUMERALS = "一二三四五六七八九十"
_START = re.compile(
    r"\b(?:first(?:ly)?|to begin with)\b[,:]?\s*|首先[，,：:]?|^请?先|第一步[，,：:]?", re.I
)
_NEXT = re.compile(
    r"[,;.]?\s*\b(?:and\s+)?(?:then|after\s+that|afterwards|finally|lastly|subsequently|"
    r"after\s+which|once\s+(?:that|this|it)(?:\s+is|'s|\s+has\s+been)\s+(?:done|finished|"
    r"complete|ready)|when\s+(?:(?:that|this|it)(?:'s|\s+is)\s+)?(?:done|finished|complete|ready)|"
    r"followed\s+by)\b[,:]?\s*"
    r"|[,;.]\s*(?:next|second(?:ly)?|third(?:ly)?|fourth(?:ly)?|fifth(?:ly)?)\b[,:]?\s*"
    r"|[，,；;。]?\s*(?:然后|接着|接下来|紧接着|随后|之后|跟住|跟着|最后|并且|第[二三四五六七八九十]步)[，,：:]?\s*"
    r"|[，,；;]\s*再\s*|(?<=[\u4e00-\u9fff])(?:以后|之后|后)再\s*"
    # "... and have it reviewed", "..., and get them translated": the work done on the result
    r"|[,;]?\s*\band\s+(?=(?:have|get)\s+(?:it|this|that|them|these|those)\s+[\w-]*(?:ed|en|read)\b)",
    re.I,
)
# "先A再B": after a first step that "先" opens, "再" (not "再次", "再见") starts the next one
_ZH_FIRST = re.compile(r"^(?:请|帮我|麻烦)?(?:首先|先)")
_ZH_THEN = re.compile(r"(?<=[\u4e00-\u9fffA-Za-z0-9])再(?![次见说一])")
_MAX_PREFIX_CHARS = 40


def split_sequence(text: str) -> list[str]:
    """The ordered parts of a request ("first A, then B, finally C", "1. A 2. B",
    "首先A，然后B，最后C", "A，再B", "A并且B"; traditional characters too, parts as written);
    ``[]`` when it is not a sequence of 2+ parts."""
    text = text.strip()
    converted = simplified(text)
    if converted != text:
        return _written_as(text, converted, split_sequence(converted))
    parts = _split_numbered(text)
    if not parts:
        if _ZH_FIRST.search(text):
            text = _ZH_THEN.sub("，再", text)
        first_next = _NEXT.search(text)
        start = _START.search(text)
        if (
            first_next
            and start
            and start.start() < first_next.start()
            and start.start() <= _MAX_PREFIX_CHARS
        ):
            text = text[: start.start()] + text[start.end() :]
        parts = _NEXT.split(text)
    cleaned = [p for p in (part.strip(_TRIM) for part in parts) if re.search(r"\w", p)]
    if len(cleaned) < 2:
        return []
    return [piece for part in cleaned for piece in _listed_steps(part)]


# "Fix the bug, write a test, then update the changelog": before a "then", the steps may be a
# comma list, each starting with a verb of work.
WORK_VERBS = (  # verbs that ask for a kind of work ("summari[sz]e": a regex alternation)
    "add|analy[sz]e|book|build|calculate|check|choose|clean|collect|compare|compile|compute|"
    "convert|create|deploy|design|document|draft|edit|estimate|explain|extract|find|fix|format|"
    "gather|identify|implement|list|look|make|merge|outline|pick|plan|prepare|proofread|publish|"
    "rank|refactor|research|review|run|search|send|summari[sz]e|test|translate|update|verify|write"
)
_LISTED_STEP = re.compile(rf",\s*(?=(?:{WORK_VERBS})\b)", re.I)


def _listed_steps(part: str) -> list[str]:
    pieces = [p.strip(_TRIM) for p in _LISTED_STEP.split(part)]
    return [p for p in pieces if p]


def _number(match: re.Match[str]) -> int:
    digits, zh, circled = match.group(1) or match.group(2), match.group(3), match.group(4)
    if zh:
        return _ZH_NUMERALS.index(zh) + 1
    if circled:
        return ord(circled) - ord("①") + 1
    return int(digits)


def _split_numbered(text: str) -> list[str]:
    matches = list(_NUMBERED.finditer(text))
    numbers = [_number(m) for m in matches]
    if len(matches) < 2 or numbers != list(range(1, len(matches) + 1)):
        return []
    prefix = text[: matches[0].start()].strip()
    ends = [m.start() for m in matches[1:]] + [len(text)]
    parts = [text[m.end() : end] for m, end in zip(matches, ends, strict=True)]
    if prefix and not prefix.endswith((":", "：")):
        parts[0] = f"{prefix} {parts[0]}"
    return parts
