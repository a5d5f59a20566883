"""Find structure in a request: comparisons (entities and aspects) and ordered sequences."""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamgraph.text import has_cjk

_TRIM = " \t\r\n.,;:!?。，；：！？、\"'“”"
_MAX_ENTITY_WORDS = 5
_MAX_ENTITY_CHARS = 40

# --- comparisons -----------------------------------------------------------------------------
_EN_VERB = re.compile(
    r"^(?:please\s+|can you\s+|could you\s+)?(?:compare|contrast)\s+(?P<body>.+)$", re.I | re.S
)
_EN_DIFF = re.compile(r"\bdifferences?\s+between\s+(?P<body>.+)$", re.I | re.S)
_EN_VS = re.compile(r"\s(?:vs\.?|versus)\s", re.I)
_EN_ASPECT_MARK = re.compile(
    r"\s*:\s*|\s+(?:on|in terms of|regarding|with re(?:spect|gard) to|across|based on)\s+", re.I
)
_EN_THE_OF = re.compile(r"^the\s+(?P<aspects>.+?)\s+of\s+(?P<entities>.+)$", re.I | re.S)
_EN_ENTITY_SEP = re.compile(
    r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|with|to|vs\.?|versus|against|or)\s+", re.I
)
_EN_ASPECT_SEP = re.compile(r"\s*[,;/&]\s*(?:and\s+)?|\s+and\s+", re.I)
_EN_LEADING = re.compile(r"^(?:the|their|its|both)\s+", re.I)

_ZH_VERB = re.compile(r"^(?:请|帮我|请帮我)?\s*(?:比较|对比|比对)(?:一下)?\s*(?P<body>.+)$", re.S)
_ZH_DIFF = re.compile(
    r"^(?:请问)?\s*(?P<body>.+?)\s*(?:之间)?(?:有什么|有何|有哪些)?(?:区别|差异|异同)"
)
_ZH_ASPECT_MARK = re.compile(r"\s*(?:的|在)\s*")
_ZH_ENTITY_SEP = re.compile(r"\s*(?:以及|还是|和|与|跟|及|、|,|，|vs\.?|VS|versus)\s*")
_ZH_ASPECT_SEP = re.compile(r"\s*(?:以及|和|与|及|或|、|,|，|;|；|/)\s*")
_ZH_ASPECT_TAIL = re.compile(r"(?:方面|上)?(?:的)?(?:差异|区别|异同|优劣|不同|表现|对比|比较)?$")


@dataclass(frozen=True)
class Comparison:
    """Things to compare, the aspects to compare them on (may be empty), and the language."""

    entities: tuple[str, ...]
    aspects: tuple[str, ...]
    chinese: bool


def parse_comparison(text: str) -> Comparison | None:
    """The comparison ``text`` asks for, or None when it is not a comparison of 2+ things."""
    text = text.strip()
    chinese = has_cjk(text)
    parsed = _parse_chinese(text) if chinese else None
    if parsed is None:
        parsed = _parse_english(text)
    if parsed is None:
        return None
    entities, aspects = parsed
    if len(entities) < 2 or len(set(entities)) < len(entities) or not all(map(_short, entities)):
        return None
    return Comparison(tuple(entities), tuple(aspects), chinese)


def _short(entity: str) -> bool:
    return len(entity.split()) <= _MAX_ENTITY_WORDS and len(entity) <= _MAX_ENTITY_CHARS


def _clean(parts: list[str], leading: re.Pattern[str] | None = None) -> list[str]:
    out: list[str] = []
    for part in parts:
        part = part.strip(_TRIM)
        part = leading.sub("", part).strip(_TRIM) if leading else part
        if part and part.lower() != "etc" and part not in out:
            out.append(part)
    return out


def _parse_english(text: str) -> tuple[list[str], list[str]] | None:
    match = _EN_VERB.match(text) or _EN_DIFF.search(text)
    body = match.group("body") if match else (text if _EN_VS.search(text) else None)
    if body is None:
        return None
    mark = _EN_ASPECT_MARK.search(body)
    the_of = _EN_THE_OF.match(body.strip())
    if mark:
        entities, aspects = body[: mark.start()], body[mark.end() :]
    elif the_of:
        entities, aspects = the_of.group("entities"), the_of.group("aspects")
    else:
        entities, aspects = body, ""
    if match is None:  # "..., A vs B": only the clause holding "vs" names the entities
        clauses = reversed(re.split(r"[,;?!]\s+", entities))
        entities = next((c for c in clauses if _EN_VS.search(c)), entities)
    return (
        _clean(_EN_ENTITY_SEP.split(entities), _EN_LEADING),
        _clean(_EN_ASPECT_SEP.split(aspects), _EN_LEADING),
    )


def _parse_chinese(text: str) -> tuple[list[str], list[str]] | None:
    match = _ZH_VERB.match(text) or _ZH_DIFF.match(text)
    if match is None:
        return None
    parts = _ZH_ASPECT_MARK.split(match.group("body").strip(_TRIM), maxsplit=1)
    aspects = _ZH_ASPECT_TAIL.sub("", parts[1].strip(_TRIM)) if len(parts) > 1 else ""
    cleaned = [_ZH_ASPECT_TAIL.sub("", a.strip(_TRIM)) for a in _ZH_ASPECT_SEP.split(aspects)]
    return _clean(_ZH_ENTITY_SEP.split(parts[0])), _clean(cleaned)


# --- sequences -------------------------------------------------------------------------------
_NUMBERED = re.compile(r"(?<![A-Za-z0-9.])(\d{1,2})\s*[.)、](?!\d)\s*")
_START = re.compile(
    r"\b(?:first(?:ly)?|to begin with)\b[,:]?\s*|首先[，,：:]?|^请?先|第一步[，,：:]?", re.I
)
_NEXT = re.compile(
    r"[,;.]?\s*\b(?:and\s+)?(?:then|after\s+that|afterwards|finally|lastly)\b[,:]?\s*"
    r"|[,;.]\s*next\b[,:]?\s*"
    r"|[，,；;。]?\s*(?:然后|接着|随后|最后|并且|第[二三四五六七八九十]步)[，,：:]?\s*"
    r"|[，,；;]\s*再\s*",
    re.I,
)
_MAX_PREFIX_CHARS = 40


def split_sequence(text: str) -> list[str]:
    """The ordered parts of a request ("first A, then B, finally C", "1. A 2. B",
    "首先A，然后B，最后C", "A，再B", "A并且B"); ``[]`` when it is not a sequence of 2+ parts."""
    text = text.strip()
    parts = _split_numbered(text)
    if not parts:
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
    return cleaned if len(cleaned) >= 2 else []


def _split_numbered(text: str) -> list[str]:
    matches = list(_NUMBERED.finditer(text))
    numbers = [int(m.group(1)) for m in matches]
    if len(matches) < 2 or numbers != list(range(1, len(matches) + 1)):
        return []
    prefix = text[: matches[0].start()].strip()
    ends = [m.start() for m in matches[1:]] + [len(text)]
    parts = [text[m.end() : end] for m, end in zip(matches, ends, strict=True)]
    if prefix and not prefix.endswith((":", "：")):
        parts[0] = f"{prefix} {parts[0]}"
    return parts
