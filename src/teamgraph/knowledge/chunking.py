"""Split documents into search-sized chunks.

Markdown is split at ATX headings (``#`` .. ``######``; lines inside fenced code blocks are never
headings), and every chunk carries its heading path, e.g. ``"PostgreSQL > Security"``. Plain text
has no headings: its chunks carry an empty heading path. Sections longer than ``max_chars`` are
packed into several chunks at paragraph boundaries; a single over-long paragraph is split at
sentence ends and, failing that, at whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_CHARS = 1500
HEADING_SEPARATOR = " > "

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_SENTENCE = re.compile(r".+?(?:[.!?]+(?:\s+|$)|[。！？]+\s*|$)", re.DOTALL)


@dataclass(frozen=True)
class Chunk:
    """One searchable passage: its heading path and its text."""

    heading: str
    text: str


def chunk_markdown(source: str, max_chars: int = MAX_CHARS) -> list[Chunk]:
    """Split markdown into chunks by heading, then by paragraph down to ``max_chars``."""
    chunks: list[Chunk] = []
    for heading, body in _sections(source):
        chunks.extend(Chunk(heading, piece) for piece in split_paragraphs(body, max_chars))
    return chunks


def chunk_text(source: str, max_chars: int = MAX_CHARS) -> list[Chunk]:
    """Split plain text into paragraph-aligned chunks of at most ``max_chars``."""
    return [Chunk("", piece) for piece in split_paragraphs(source, max_chars)]


def split_paragraphs(text: str, max_chars: int = MAX_CHARS) -> list[str]:
    """Greedily pack the paragraphs of ``text`` into pieces of at most ``max_chars``."""
    pieces: list[str] = []
    current = ""
    for paragraph in _paragraphs(text, max_chars):
        if current and len(current) + 2 + len(paragraph) > max_chars:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        pieces.append(current)
    return pieces


def _sections(source: str) -> Iterator[tuple[str, str]]:
    """Yield ``(heading path, body)`` for every heading section (and any preamble)."""
    stack: list[tuple[int, str]] = []
    body: list[str] = []
    in_fence = False
    for line in source.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            body.append(line)
            continue
        yield _path(stack), "\n".join(body)
        body = []
        level = len(match.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, match.group(2).strip()))
    yield _path(stack), "\n".join(body)


def _path(stack: list[tuple[int, str]]) -> str:
    return HEADING_SEPARATOR.join(title for _, title in stack if title)


def _paragraphs(text: str, max_chars: int) -> Iterator[str]:
    """Non-empty paragraphs of ``text``; over-long ones are cut into ``max_chars`` pieces."""
    for raw in _BLANK_LINES.split(text.replace("\r\n", "\n")):
        paragraph = raw.strip("\n").rstrip()
        if not paragraph.strip():
            continue
        if len(paragraph) <= max_chars:
            yield paragraph
        else:
            yield from _split_long(paragraph, max_chars)


def _split_long(paragraph: str, max_chars: int) -> Iterator[str]:
    """Cut one paragraph at sentence ends, hard-cutting sentences that are still too long."""
    current = ""
    for sentence in _SENTENCE.findall(paragraph):
        for part in _hard_cut(sentence, max_chars):
            if current and len(current) + len(part) > max_chars:
                yield current.strip()
                current = ""
            current += part
    if current.strip():
        yield current.strip()


def _hard_cut(text: str, max_chars: int) -> Iterator[str]:
    """Cut ``text`` into pieces of at most ``max_chars``, preferring whitespace boundaries.

    Short text is yielded unchanged (trailing whitespace included) so that sentences can be
    re-joined exactly as they were written.
    """
    while len(text.strip()) > max_chars:
        text = text.strip()
        cut = text.rfind(" ", 0, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        yield text[:cut]
        text = text[cut:]
    if text.strip():
        yield text
