"""Extractive answering for the offline model: pick the sentences that best match a question."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from teamgraph.text import has_cjk, is_small_talk, is_thanks, split_clarified, tokenize

OFFLINE_NOTICE = "_Offline model (rule-based, no LLM): extractive answer from {n} source(s)._"
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_CODE = re.compile(r"`[^`\n]+`")
_HIDDEN = re.compile(r"\x00(\d+)\x00")
# "These notes cover ...": a document describing itself says nothing about the subject.
_ABOUT_ITSELF = re.compile(
    r"^(?:these|this|the following)\s+(?:notes?|documents?|pages?|sections?|files?|guides?|"
    r"articles?|chapters?)\b",
    re.I,
)
_HIT_LABEL = re.compile(r"^\[\d+\]\s+(.+)$")
_MARKUP = re.compile(r"^(#+\s*|[-*]\s+|\d+\.\s+|>\s*|\*\*[^*]+\*\*:\s*)+")
# Words that say what to do rather than what about; they make poor search terms.
TASK_WORDS = frozenset(
    "research find fact facts each differ differs difference differences how they write "
    "summary summarize summarise comparing compare comparison based finding findings about "
    "information collect gather analyze analyse analysis task step report please original "
    "request user answer look up search describe explain option options overview detail details "
    "short brief key main".split()
)


# An aspect named in one language finds passages written in the other (a Chinese request over
# English documents, and back): the common aspects of a comparison, both ways.
_GLOSSARY = {
    "性能": "performance speed",
    "速度": "speed performance",
    "成本": "cost costs pricing",
    "价格": "price pricing cost",
    "费用": "cost costs fees",
    "安全": "security",
    "安全性": "security",
    "可靠性": "reliability",
    "持久性": "durability persistence",
    "持久化": "persistence durability",
    "扩展性": "scalability scaling",
    "可扩展性": "scalability scaling",
    "易用性": "usability ease",
    "许可": "licence license licensing",
    "许可证": "licence license licensing",
    "运维": "operations operational",
    "生态": "ecosystem",
}
_ENGLISH_TO_CHINESE = {
    english: chinese for chinese, englishes in _GLOSSARY.items() for english in englishes.split()
}


def translated(aspect: str) -> str:
    """An aspect's words in the other language (empty when the glossary has none)."""
    key = aspect.strip().lower()
    return _GLOSSARY.get(key) or _ENGLISH_TO_CHINESE.get(key, "")


def content_terms(text: str) -> set[str]:
    """The tokens of ``text`` that name a subject (task words removed)."""
    return set(tokenize(text)) - _task_terms()


@cache
def _task_terms() -> frozenset[str]:
    """The tokens of :data:`TASK_WORDS` (tokenized once: 40 words for every sentence cost a
    third of an offline reply)."""
    return frozenset(t for w in TASK_WORDS for t in tokenize(w))


def search_query(task: str) -> str:
    """A keyword query for a search tool: the task's first line without instruction words (the
    user's request, for a template's task that names it) — and, when the user answered a
    clarifying question, the answer's words first (the request alone was too vague to search
    with)."""
    head, marker, asked = task.partition("\n\nUser's original request:")
    # a template's task is the template's wording: the request it serves says what to find
    original, answers = split_clarified(asked.strip() if marker and asked.strip() else head)
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
    spans = _CODE.findall(text)  # code spans are never cut: hidden while splitting
    numbers = iter(range(len(spans)))
    text = _CODE.sub(lambda _: f"\x00{next(numbers)}\x00", text)
    out = []
    for raw in _SENTENCE.split(text):
        line = _MARKUP.sub("", raw.strip()).strip()
        line = _HIDDEN.sub(lambda m: spans[int(m.group(1))], line)
        if len(line) < 12 or line.startswith(("_Offline model", "**Offline")):
            continue
        if not _ABOUT_ITSELF.match(line):
            out.append(line)
    return out


def best_sentences(question: str, source: Source, limit: int) -> list[str]:
    """Up to ``limit`` sentences of ``source`` that together cover most of ``question``'s words,
    in text order: each pick is the sentence adding the most words not covered yet (then the
    one sharing most, then the earlier), so "PostgreSQL and MongoDB" hears from both."""
    wanted = content_terms(question)
    candidates = [
        (position, sentence, wanted & content_terms(sentence))
        for position, sentence in enumerate(sentences(source.text))
    ]
    candidates = [c for c in candidates if c[2]]
    picked: list[tuple[int, str, set[str]]] = []
    covered: set[str] = set()
    while candidates and len(picked) < limit:
        best = max(candidates, key=lambda c: (len(c[2] - covered), len(c[2]), -c[0]))
        picked.append(best)
        covered |= best[2]
        candidates.remove(best)
    return [sentence for _, sentence, _ in sorted(picked)]


def nothing_to_go_on(question: str) -> str:
    """The honest answer without any material: what the offline model would need."""
    del question  # not repeated: a member's task may carry notes meant for it, not the user
    return (
        OFFLINE_NOTICE.format(n=0)
        + "\n\nI can't answer this yet: the offline model answers only from what it is "
        "given — the team's documents, tool results or earlier steps — and nothing on this "
        "request reached me. Ask about a subject the team's documents cover (a member with "
        "`search_docs` searches its `knowledge:`), paste the text to work on into the request, "
        "or use a language model (`model:` in the team file)."
    )


def relevant(question: str, sources: list[Source], per_source: int = 2) -> list[Source]:
    """The sources worth quoting for ``question``: those whose label and best sentences cover
    more than half of what the best source covers of the question's subject words (a passage
    that only names the subject — "MongoDB is a document database" for a question on its
    security — is filler), leaving out a source that only restates the question (a plan that
    is the request). The question is its first paragraph (what follows instructs). When no
    source shares a word with the question, all of them."""
    question = question.strip().split("\n\n", 1)[0]
    wanted = content_terms(question)
    if not wanted:
        return sources
    scored = []
    for source in sources:
        if content_terms(" ".join(sentences(source.text))) <= wanted:
            continue  # says nothing the question does not
        text = " ".join([source.label, *best_sentences(question, source, per_source)])
        scored.append((source, len(wanted & content_terms(text)) / len(wanted)))
    best = max((share for _, share in scored), default=0.0)
    if best <= 0:
        return sources
    return [source for source, share in scored if share > best / 2]


def extractive_answer(question: str, sources: list[Source], per_source: int = 2) -> str:
    """A markdown answer quoting the most relevant sentences of each relevant source, labelled."""
    if not sources:
        return nothing_to_go_on(question)
    sections, used = [], set()
    sources = relevant(question, sources, per_source)
    for source in sources:
        picked = best_sentences(question, source, per_source) or sentences(source.text)[:1]
        picked = [s for s in picked if s not in used]  # a sentence is quoted once
        used.update(picked)
        if picked:
            sections.append(f"**{source.label}**: " + " ".join(picked))
    body = "\n\n".join(sections) or "The sources did not contain text relevant to the task."
    return OFFLINE_NOTICE.format(n=len(sources)) + "\n\n" + body


_LABELLED = re.compile(r"^\*\*(.+?)\*\*:\s*(.+)$", re.DOTALL)
_NOTICE = OFFLINE_NOTICE.split("{", 1)[0]


def quoted_sources(author: str, text: str) -> list[Source]:
    """An answer as sources: its ``**label**: text`` paragraphs keep their labels (an offline
    member quotes its sources that way); other paragraphs are ``author``'s own."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        labelled = _LABELLED.match(paragraph.strip())
        if labelled:
            found.append(Source(labelled.group(1), labelled.group(2)))
        elif paragraph.strip() and not paragraph.startswith(_NOTICE):
            found.append(Source(author, paragraph.strip()))
    return found


def small_talk(task: str) -> str | None:
    """The reply to a greeting or a thank-you (nothing else in the message), in its language:
    what the offline model can do — never a search for "hello"."""
    text = task.strip()
    if not is_small_talk(text):
        return None
    if has_cjk(text):
        opening = "不客气！" if is_thanks(text) else "你好！"
        return (
            f"{opening}我在 teamgraph 的离线模型上运行（基于规则，没有大语言模型）："
            "请就团队文档涉及的主题提问（例如按几个方面比较两样东西），或交给我一个任务。"
            "配置语言模型后（团队文件中的 `model:`），可以自由对话。"
        )
    opening = "You're welcome!" if is_thanks(text) else "Hello!"
    return (
        f"{opening} I run on teamgraph's offline model (rule-based, no LLM): ask me about what "
        "this team's documents cover — for example, compare two things on a few aspects — or "
        "give me a task. With a language model configured (`model:` in the team file) I can "
        "chat freely."
    )
