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

**Queries.** User text is never passed to ``MATCH`` as is. It is cut into word and CJK terms by
:mod:`teamgraph.text` (the same cut as routing and the notes search; words unstemmed, as the
index stores them), stop words are dropped, and every term is double-quoted, which makes FTS5
operators, ``*``, ``-``, parentheses and quotes plain text; the terms are joined with ``OR``.
"""

from __future__ import annotations

import hashlib
import re

from teamgraph.text import CJK_RANGES, STOP_WORDS, search_terms, stem, tokenize

ZERO_WIDTH_SPACE = "\u200b"
MAX_QUERY_TERMS = 32

_CJK_CHAR = re.compile(f"[{CJK_RANGES}]")
_WORD = re.compile(r"[^\W\d_]+")
_TOKEN = re.compile(f"(?P<cjk>[{CJK_RANGES}])|[^\\W_{CJK_RANGES}]+")  # a CJK character, a word


def mark_cjk(text: str) -> str:
    """Return ``text`` with every CJK character wrapped in zero-width spaces (for indexing)."""
    cleaned = text.replace(ZERO_WIDTH_SPACE, "")
    return _CJK_CHAR.sub(lambda m: f"{ZERO_WIDTH_SPACE}{m.group()}{ZERO_WIDTH_SPACE}", cleaned)


def unmark_cjk(text: str) -> str:
    """Undo :func:`mark_cjk` (used on snippets read back from the index)."""
    return text.replace(ZERO_WIDTH_SPACE, "")


def query_terms(query: str) -> list[str]:
    """The search terms of free user text (:func:`teamgraph.text.search_terms`), at most
    :data:`MAX_QUERY_TERMS` of them."""
    return search_terms(query)[:MAX_QUERY_TERMS]


def content_words(query: str) -> str:
    """``query`` without its English stop words ("How do I keep Redis data after a restart?" →
    "keep Redis data restart?"): what a query is embedded as, so that function words, which
    every question shares, do not pull it towards other questions' passages."""
    kept = _WORD.sub(lambda m: "" if m.group().lower() in STOP_WORDS else m.group(), query)
    return " ".join(kept.split()) or query


def scope_term(collection: str) -> str:
    """The full-text term that stands for ``collection`` in the ``scope`` column: digits of its
    hash (one token; no stemmer touches digits)."""
    digest = hashlib.sha256(collection.encode()).hexdigest()[:15]
    return str(int(digest, 16))


def build_match_query(query: str) -> str | None:
    """Build a safe FTS5 ``MATCH`` expression (quoted terms joined by ``OR``) from user text.

    Returns ``None`` when the text holds no searchable term (empty, punctuation, stop words).
    """
    terms = match_phrases(query)
    return " OR ".join(terms) if terms else None


def match_phrases(query: str) -> list[str]:
    """The query's terms as FTS5 phrases (quoted, CJK marked): what :func:`build_match_query`
    joins."""
    return [_quote(mark_cjk(term)) for term in query_terms(query)]


def _quote(term: str) -> str:
    """FTS5 string literal: inside double quotes everything is text ("" escapes a quote)."""
    escaped = term.replace('"', '""')
    return f'"{escaped}"'


def snippet(text: str, query: str, size: int = 24) -> str:
    """A window of ``size`` tokens (words, CJK characters) of ``text`` on one line, where the
    query's terms are densest: matched words (by stem) and CJK bigrams in ``**`` (markdown
    bold), cuts marked ``…``."""
    found = list(_TOKEN.finditer(text))
    if not found:
        return ""
    spans = [m.span() for m in found]
    hits = _matched(text, found, query)
    starts = {max(0, i - 3) for i, hit in enumerate(hits) if hit} or {0}
    best = max(starts, key=lambda i: (sum(hits[i : i + size]), -i))
    stop = min(best + size, len(spans))
    out, end = [], spans[best][0]
    for i in range(best, stop):
        start, finish = spans[i]
        opening = hits[i] and not (i > best and hits[i - 1] and start == end)
        closing = hits[i] and (i + 1 == stop or not hits[i + 1] or spans[i + 1][0] != finish)
        bold = ("**" if opening else "", "**" if closing else "")
        out.append(f"{text[end:start]}{bold[0]}{text[start:finish]}{bold[1]}")
        end = finish
    lead = "… " if best > 0 else ""
    tail = " …" if stop < len(spans) else ""
    return lead + " ".join("".join(out).split()) + tail


def _matched(text: str, tokens: list[re.Match[str]], query: str) -> list[bool]:
    """Per token of ``text``: is it one of the query's words (by stem), or a character of one
    of its CJK bigrams?"""
    terms = set(tokenize(query))
    hits = [False] * len(tokens)
    for i, token in enumerate(tokens):
        if token.lastgroup != "cjk":
            hits[i] = stem(token.group().lower()) in terms
        elif token.group() in terms:
            hits[i] = True
        elif text[token.start() : token.start() + 2] in terms and i + 1 < len(tokens):
            hits[i] = hits[i + 1] = True
    return hits
