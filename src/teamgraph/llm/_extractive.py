"""Extractive answering for the offline model: pick the sentences that best match a question."""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamgraph.text import split_clarified, tokenize

OFFLINE_NOTICE = "_Offline model (rule-based, no LLM): extractive answer from {n} source(s)._"
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_HIT_LABEL = re.compile(r"^\[\d+\]\s+(.+)$")
_MARKUP = re.compile(r"^(#+\s*|[-*]\s+|\d+\.\s+|>\s*|\*\*[^*]+\*\*:\s*)+")
# Words that say what to do rather than what about; they make poor search terms.
TASK_WORDS = frozenset(
    "research find fact facts each differ differs difference differences how they write "
    "summary summarize summarise comparing compare comparison based finding findings about "
    "information collect gather analyze analyse analysis task step report please original "
    "request user answer look up search describe explain".split()
)


def content_terms(text: str) -> set[str]:
    """The tokens of ``text`` that name a subject (task words removed)."""
    task = {t for w in TASK_WORDS for t in tokenize(w)}
    return set(tokenize(text)) - task


def search_query(task: str) -> str:
    """A keyword query for a search tool: the task's first line without instruction words —
    and, when the user answered a clarifying question, the answer's words first (the
    request alone was too vague to search with)."""
    original, answers = split_clarified(task.split("\n\nUser's original request:")[0])
    first = original.strip().splitlines()[0] if original.strip() else ""
    lines = [a.splitlines()[0] for a in reversed(answers) if a] + [first]
    words = [w for line in lines for w in re.findall(r"[\w.+#-]+", line)]
    kept = [w for w in words if w.lower() not in TASK_WORDS and content_terms(w)]
    return " ".join(dict.fromkeys(kept)) or first


@dataclass(frozen=True)
class Source:
    label: str
    text: str


def split_blocks(label: str, text: str) -> list[Source]:
    """Split a tool result of ``[n] label`` blocks (search_docs) into one source per block."""
    sources: list[Source] = []
    for block in re.split(r"\n\s*\n(?=\[\d+\]\s)", text.strip()):
        first, _, rest = block.partition("\n")
        match = _HIT_LABEL.match(first.strip())
        if match and rest.strip():
            sources.append(Source(match.group(1).strip(), rest.strip()))
        elif block.strip():
            sources.append(Source(label, block.strip()))
    return sources


def sentences(text: str) -> list[str]:
    """Sentences of ``text``; hard-wrapped lines inside a paragraph are joined first."""
    text = re.sub(r"(?<=\S)[ \t]*\n(?=[ \t]*[^\s#>*\d-])", " ", text)
    out = []
    for raw in _SENTENCE.split(text):
        line = _MARKUP.sub("", raw.strip()).strip()
        if len(line) >= 12 and not line.startswith(("_Offline model", "**Offline")):
            out.append(line)
    return out


def best_sentences(question: str, source: Source, limit: int) -> list[str]:
    """The ``limit`` sentences of ``source`` sharing most words with ``question``, in text order."""
    wanted = content_terms(question)
    scored = []
    for position, sentence in enumerate(sentences(source.text)):
        overlap = len(wanted & content_terms(sentence))
        if overlap:
            scored.append((overlap, -position, sentence))
    top = sorted(scored, reverse=True)[:limit]
    return [s for _, _, s in sorted(top, key=lambda item: -item[1])]


def extractive_answer(question: str, sources: list[Source], per_source: int = 2) -> str:
    """A markdown answer quoting the most relevant sentences of each source, labelled."""
    if not sources:
        return (
            OFFLINE_NOTICE.format(n=0)
            + "\n\nNo documents, tool results or previous steps were available to answer: "
            + question.strip().splitlines()[0]
        )
    sections = []
    for source in sources:
        picked = best_sentences(question, source, per_source) or sentences(source.text)[:1]
        if picked:
            sections.append(f"**{source.label}**: " + " ".join(picked))
    body = "\n\n".join(sections) or "The sources did not contain text relevant to the task."
    return OFFLINE_NOTICE.format(n=len(sources)) + "\n\n" + body
