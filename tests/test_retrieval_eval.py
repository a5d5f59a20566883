"""The retrieval evaluation's question sets are what they say, and hybrid search meets its
targets on both (evals/retrieval.py --check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from teamgraph.knowledge import KnowledgeBase

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "evals"))

import retrieval  # noqa: E402  (evals/ is not a package)


@pytest.fixture(scope="module")
def keyword_kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    from teamgraph.config import Settings

    kb = KnowledgeBase(tmp_path_factory.mktemp("kb") / "kb.db", Settings(embedding_model="none"))
    kb.ingest([retrieval.KNOWLEDGE])
    return kb


@pytest.mark.parametrize("name", list(retrieval.SETS))
def test_every_answer_names_a_passage_of_the_example_knowledge(
    keyword_kb: KnowledgeBase, name: str
) -> None:
    passages = set()
    for collection_hit in keyword_kb.documents("shared"):
        for chunk in keyword_kb.chunks("shared", collection_hit.id) or []:
            passages.add(f"{Path(collection_hit.source).name}#{chunk.heading.split(' > ')[-1]}")
    questions = retrieval.load(retrieval.SETS[name])
    assert {q.kind for q in questions} == set(retrieval.KINDS)
    assert {q.lang for q in questions} == {"en", "zh"}
    for question in questions:
        assert set(question.answers) <= passages, question.q


@pytest.mark.parametrize("name", list(retrieval.SETS))
def test_paraphrases_share_no_searchable_term_with_their_answers(
    keyword_kb: KnowledgeBase, name: str
) -> None:
    for question in retrieval.load(retrieval.SETS[name]):
        if question.kind == "paraphrase":
            assert retrieval.shared_terms(keyword_kb, question) == [], question.q


def test_hybrid_search_meets_the_evaluation_targets() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "evals" / "retrieval.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all targets met" in done.stdout
    assert "development set, offline: " in done.stdout and "held-out set, offline: " in done.stdout
