"""Text handling shared by indexing and querying: CJK segmentation and safe FTS5 queries.

**CJK.** FTS5's ``unicode61`` tokenizer splits on separators only, and Chinese (or Japanese) text
has none, so a whole sentence would become one token. We therefore surround every CJK character
with a zero-width space (U+200B) before it reaches the index: U+200B is a format character, which
``unicode61`` treats as a separator, so each CJK character becomes its own token while Latin words
are tokenized as usual. Because U+200B is invisible, text and snippets read back from the index are
cleaned by just deleting it (:func:`unmark_cjk`). On the query side a run of CJK characters becomes
phrase queries over overlapping character bigrams, e.g. ``数据库`` -> ``"数据" OR "据库"``, so
unsegmented Chinese queries still match. (The ``trigram`` tokenizer was the alternative; it cannot
match queries shorter than three characters, and two-character Chinese words are very common.)

**Queries.** User text is never passed to ``MATCH`` as is. It is cut into word and CJK terms,
English stop words are dropped, and every term is double-quoted, which makes FTS5 operators,
``*``, ``-``, parentheses and quotes plain text; the terms are joined with ``OR``.
"""

from __future__ import annotations

import re

ZERO_WIDTH_SPACE = "\u200b"
MAX_QUERY_TERMS = 32

_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_CHAR = re.compile(f"[{_CJK_RANGES}]")
_TERM = re.compile(f"[{_CJK_RANGES}]+|[^\\W_{_CJK_RANGES}]+")

_CJK_STOP_CHARS = frozenset("的了和与及或是在也就都而把被这那之其")
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def mark_cjk(text: str) -> str:
    """Return ``text`` with every CJK character wrapped in zero-width spaces (for indexing)."""
    cleaned = text.replace(ZERO_WIDTH_SPACE, "")
    return _CJK_CHAR.sub(lambda m: f"{ZERO_WIDTH_SPACE}{m.group()}{ZERO_WIDTH_SPACE}", cleaned)


def unmark_cjk(text: str) -> str:
    """Undo :func:`mark_cjk` (used on snippets read back from the index)."""
    return text.replace(ZERO_WIDTH_SPACE, "")


def query_terms(query: str) -> list[str]:
    """Split free user text into search terms: lower-cased words without stop words, and
    CJK bigrams. Duplicates are removed; at most :data:`MAX_QUERY_TERMS` terms are kept."""
    terms: list[str] = []
    for token in _TERM.findall(query):
        if _CJK_CHAR.match(token):
            terms.extend(_cjk_terms(token))
        elif token.lower() not in STOP_WORDS:
            terms.append(token.lower())
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


def build_match_query(query: str) -> str | None:
    """Build a safe FTS5 ``MATCH`` expression (quoted terms joined by ``OR``) from user text.

    Returns ``None`` when the text holds no searchable term (empty, punctuation, stop words).
    """
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join(_quote(mark_cjk(term)) for term in terms)


def _quote(term: str) -> str:
    """FTS5 string literal: inside double quotes everything is text ("" escapes a quote)."""
    escaped = term.replace('"', '""')
    return f'"{escaped}"'


def _cjk_terms(run: str) -> list[str]:
    """Overlapping bigrams of a CJK run; a lone character unless it is a particle."""
    if len(run) == 1:
        return [] if run in _CJK_STOP_CHARS else [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]
