"""The local knowledge base (SQLite FTS5) and the ``search_docs`` tool."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from teamgraph.config import EXAMPLES as PACKAGED
from teamgraph.config import Settings
from teamgraph.errors import UsageError
from teamgraph.knowledge import Hit, IngestReport, KnowledgeBase
from teamgraph.knowledge.chunking import chunk_markdown, chunk_text
from teamgraph.knowledge.fts_query import ZERO_WIDTH_SPACE, build_match_query, query_terms
from teamgraph.knowledge.index import SHARED, Mode
from teamgraph.tools.search_docs import TOOL_DESCRIPTION, format_hits, make_search_docs_tool

EXAMPLES = PACKAGED / "knowledge"  # shipped with the package (examples/ links to it)
HOSTILE = ['"unbalanced', "a AND OR NEAR(", "*", "-x", "", "   ", "(((", "NOT", 'x" OR "y', "^:;"]


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase(tmp_path / "teamgraph.db")


@pytest.fixture
def examples_kb(kb: KnowledgeBase) -> KnowledgeBase:
    kb.ingest([EXAMPLES])
    return kb


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- ingest ---------------------------------------------------------------------------------------
def test_ingest_examples_reports_files_and_chunks(kb: KnowledgeBase) -> None:
    report = kb.ingest([EXAMPLES])

    expected = sorted(str(p) for p in EXAMPLES.glob("*.md"))
    assert len(expected) == 8
    assert report == IngestReport(files_indexed=8, files_unchanged=0, chunks=kb.count())
    assert kb.count() > 8
    assert kb.sources() == expected


def test_kb_tables_live_beside_other_tables(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO runs VALUES ('run-1')")

    KnowledgeBase(db).ingest([EXAMPLES / "redis.md"])
    KnowledgeBase(db)  # opening again must not recreate or clear anything

    with sqlite3.connect(db) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        runs = conn.execute("SELECT id FROM runs").fetchall()
    assert runs == [("run-1",)]
    assert {name for name in names if "kb_" not in name} == {"runs", "sqlite_autoindex_runs_1"}
    assert KnowledgeBase(db).count() > 0


def test_unchanged_files_are_skipped(kb: KnowledgeBase, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _write(docs / "a.md", "# Alpha\n\nApples grow on trees.\n")
    _write(docs / "nested" / "b.txt", "Bananas are yellow.\n\nBananas are curved.\n")

    first = kb.ingest([docs])
    second = kb.ingest([docs])

    assert first == IngestReport(files_indexed=2, files_unchanged=0, chunks=2)
    assert second == IngestReport(files_indexed=0, files_unchanged=2, chunks=0)
    assert kb.count() == 2


def test_changed_file_replaces_its_chunks(kb: KnowledgeBase, tmp_path: Path) -> None:
    doc = _write(tmp_path / "notes.md", "# Notes\n\n## One\n\nzebra facts\n\n## Two\n\nyak facts\n")
    other = _write(tmp_path / "other.md", "# Other\n\nzebra crossing\n")
    kb.ingest([doc, other])
    assert kb.count() == 3

    _write(doc, "# Notes\n\nquokka facts only\n")
    report = kb.ingest([doc, other])

    assert report == IngestReport(files_indexed=1, files_unchanged=1, chunks=1)
    assert kb.count() == 2
    assert [Path(h.source).name for h in kb.search("zebra")] == ["other.md"]
    assert kb.search("yak") == []
    assert kb.search("quokka")[0].heading == "Notes"


def test_files_deleted_from_an_ingested_directory_are_dropped(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    keep = _write(docs / "keep.md", "# Keep\n\nwombat\n")
    gone = _write(docs / "gone.md", "# Gone\n\nplatypus\n")
    kb.ingest([docs])

    gone.unlink()
    report = kb.ingest([docs])

    assert report.files_removed == 1
    assert kb.sources() == [str(keep)]
    assert kb.search("platypus", mode="keyword") == []
    assert {h.source for h in kb.search("platypus")} <= {str(keep)}  # a wombat is near by meaning
    assert kb.count() == 1


def test_missing_path_is_named_and_nothing_is_written(kb: KnowledgeBase, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "missing.md"
    with pytest.raises(FileNotFoundError, match=r"missing\.md") as excinfo:
        kb.ingest([EXAMPLES / "redis.md", missing])
    assert excinfo.value.filename == str(missing)
    assert kb.count() == 0
    assert kb.sources() == []


def test_unsupported_file_type_is_refused(kb: KnowledgeBase, tmp_path: Path) -> None:
    image = _write(tmp_path / "diagram.png", "not really a png")
    with pytest.raises(UsageError, match=r"diagram\.png"):
        kb.ingest([image])


def test_directory_walk_skips_hidden_and_unsupported_files(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    _write(docs / "guide.markdown", "# Guide\n\nnarwhal\n")
    _write(docs / ".git" / "notes.md", "# Hidden\n\nnarwhal\n")
    _write(docs / "data.csv", "narwhal,1\n")

    kb.ingest([docs])

    assert [Path(s).name for s in kb.sources()] == ["guide.markdown"]


def test_single_path_string_is_not_iterated_character_by_character(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    doc = _write(tmp_path / "one.md", "# One\n\nokapi\n")
    assert kb.ingest(str(doc)).files_indexed == 1


# --- chunking -------------------------------------------------------------------------------------
def test_markdown_chunks_carry_heading_paths() -> None:
    text = (
        "intro\n\n# Top\n\n## A\n\nalpha\n\n### A1\n\n```sh\n# not a heading\n```\n\n## B\n\nbeta\n"
    )
    chunks = chunk_markdown(text)
    assert [(c.heading, c.text) for c in chunks] == [
        ("", "intro"),
        ("Top > A", "alpha"),
        ("Top > A > A1", "```sh\n# not a heading\n```"),
        ("Top > B", "beta"),
    ]


def test_long_sections_split_at_paragraphs() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 80 for i in range(12)]
    chunks = chunk_markdown("# Long\n\n" + "\n\n".join(paragraphs))
    assert len(chunks) > 1
    assert all(len(c.text) <= 1500 and c.heading == "Long" for c in chunks)
    assert all(c.text.startswith("Paragraph") for c in chunks)
    assert sum(c.text.count("Paragraph") for c in chunks) == 12


def test_over_long_paragraph_is_cut_without_losing_words() -> None:
    sentence = "Sloths move slowly through the canopy. "
    chunks = chunk_text(sentence * 100)
    assert len(chunks) > 1
    assert all(len(c.text) <= 1500 and c.heading == "" for c in chunks)
    assert sum(c.text.count("Sloths") for c in chunks) == 100


# --- search ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "file", "heading"),
    [
        ("MongoDB security", "mongodb.md", "MongoDB > Security"),
        ("PostgreSQL row-level security", "postgresql.md", "Row-level security"),
        ("connection pooling PgBouncer", "postgresql.md", "connection pooling"),
        ("idempotent loads", "data-pipelines.md", "Load"),
        ("index types", "postgresql.md", "Indexes"),  # stemming: index ~ indexes, type ~ types
        ("human in the loop approval", "llm-agents.md", "Human in the loop"),
        ("benchmark caveats: durability settings", "database-comparison.md", "benchmarks"),
    ],
)
def test_search_ranks_the_right_chunk_first(
    examples_kb: KnowledgeBase, query: str, file: str, heading: str
) -> None:
    top = examples_kb.search(query, mode="keyword")[0]
    assert Path(top.source).name == file
    assert heading in top.heading
    hybrid = examples_kb.search(query)[:3]  # fused with meaning: still among the first three
    assert any(Path(h.source).name == file and heading in h.heading for h in hybrid)


def test_hit_reports_source_heading_text_snippet_and_score(examples_kb: KnowledgeBase) -> None:
    hits = examples_kb.search("PostgreSQL row-level security", k=3)

    top = hits[0]
    assert top.source == str(EXAMPLES / "postgresql.md")
    assert top.heading == "PostgreSQL > Security > Row-level security"
    assert "CREATE POLICY" in top.text
    assert "**security**" in top.snippet.lower()
    assert "\n" not in top.snippet
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score > 0 for h in hits)


def test_a_query_naming_two_subjects_hears_from_both(examples_kb: KnowledgeBase) -> None:
    hits = examples_kb.search("performance PostgreSQL MongoDB", k=4)
    files = [Path(h.source).name for h in hits]
    assert {"postgresql.md", "mongodb.md"} <= set(files)
    assert max(files.count(f) for f in files) <= 2  # at most half from one file
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_one_matching_file_still_fills_k(kb: KnowledgeBase, tmp_path: Path) -> None:
    body = "\n\n".join(f"## Part {i}\n\nWombats dig burrows, part {i}." for i in range(5))
    kb.ingest([_write(tmp_path / "wombats.md", f"# Wombats\n\n{body}\n")])
    assert len(kb.search("wombats burrows", k=4)) == 4


def test_search_respects_k(examples_kb: KnowledgeBase) -> None:
    assert len(examples_kb.search("database", k=2)) == 2
    with pytest.raises(ValueError, match="k must be"):
        examples_kb.search("database", k=0)


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(examples_kb: KnowledgeBase, query: str) -> None:
    hits = examples_kb.search(query)
    assert all(isinstance(h, Hit) for h in hits)


@pytest.mark.parametrize("query", ["", "   ", "*", "(((", "the of and", "^:;"])
def test_queries_without_terms_return_nothing(examples_kb: KnowledgeBase, query: str) -> None:
    assert examples_kb.search(query) == []
    assert build_match_query(query) is None


def test_operators_become_quoted_literals() -> None:
    assert build_match_query("a AND OR NEAR(") == '"near"'
    assert build_match_query('x" OR "y*') == '"x" OR "y"'
    assert query_terms("Security security SECURITY") == ["security"]


def test_words_with_operators_still_search(examples_kb: KnowledgeBase) -> None:
    top = examples_kb.search('"WiredTiger" AND -compression*')[0]
    assert Path(top.source).name == "mongodb.md"
    assert "WiredTiger" in top.heading


def test_accents_are_folded(kb: KnowledgeBase, tmp_path: Path) -> None:
    kb.ingest([_write(tmp_path / "cafe.md", "# Menu\n\nThe café serves crêpes.\n")])
    assert kb.search("cafe crepes")[0].heading == "Menu"
    assert kb.search("CAFÉ")[0].heading == "Menu"


# --- Chinese --------------------------------------------------------------------------------------
def test_chinese_query_terms_are_bigrams() -> None:
    assert query_terms("数据库 安全") == ["数据", "据库", "安全"]
    assert query_terms("的") == []
    assert query_terms("PostgreSQL的性能") == ["postgresql", "性能"]  # cut at 的


@pytest.mark.parametrize("query", ["数据库 安全", "性能", "数据库的安全性"])
def test_chinese_queries_find_the_chinese_file(examples_kb: KnowledgeBase, query: str) -> None:
    hits = examples_kb.search(query)
    assert hits
    assert {Path(h.source).name for h in hits} == {"zh-database-notes.md"}


def test_chinese_hits_read_back_clean(examples_kb: KnowledgeBase) -> None:
    top = examples_kb.search("数据库 安全")[0]
    assert "安全" in top.heading
    assert "**安全**" in top.snippet
    assert ZERO_WIDTH_SPACE not in top.snippet + top.text + top.heading
    assert examples_kb.search("性能", mode="keyword")[0].heading.endswith("的性能")


def test_mixed_chinese_and_english_text(kb: KnowledgeBase, tmp_path: Path) -> None:
    kb.ingest([_write(tmp_path / "mix.md", "# 笔记\n\nRedis缓存的命中率很重要。\n")])
    assert kb.search("redis")[0].text == "Redis缓存的命中率很重要。"
    assert kb.search("命中率")[0].heading == "笔记"


# --- concurrency ----------------------------------------------------------------------------------
async def test_usable_from_asyncio_threads(examples_kb: KnowledgeBase) -> None:
    queries = ["MongoDB sharding", "Redis eviction", "PostgreSQL vacuum", "性能"] * 3
    results = await asyncio.gather(*(asyncio.to_thread(examples_kb.search, q) for q in queries))
    assert all(results)
    assert Path(results[1][0].source).name == "redis.md"


# --- search_docs tool -----------------------------------------------------------------------------
def test_tool_metadata(examples_kb: KnowledgeBase) -> None:
    tool = make_search_docs_tool(examples_kb)
    assert tool.name == "search_docs"
    assert tool.description == TOOL_DESCRIPTION
    assert TOOL_DESCRIPTION.startswith("Search the local knowledge base (documents ingested with")
    assert list(tool.args) == ["query"]


async def test_tool_returns_formatted_passages(examples_kb: KnowledgeBase) -> None:
    tool = make_search_docs_tool(examples_kb, k=2)

    result = await tool.ainvoke({"query": "PostgreSQL row-level security"})

    blocks = result.split("\n\n[")
    assert len(blocks) == 2
    assert result.startswith("[1] postgresql.md — PostgreSQL > Security > Row-level security\n")
    assert "CREATE POLICY" in blocks[0]
    assert blocks[1].startswith("2] ")


async def test_tool_reports_no_match(examples_kb: KnowledgeBase) -> None:
    tool = make_search_docs_tool(examples_kb)
    assert await tool.ainvoke({"query": "xylophone"}) == 'No documents matched "xylophone".'
    assert await tool.ainvoke({"query": "*"}) == 'No documents matched "*".'


def test_tool_also_works_synchronously(examples_kb: KnowledgeBase) -> None:
    tool = make_search_docs_tool(examples_kb, k=1)
    assert tool.invoke({"query": "Redis ACL"}).startswith("[1] redis.md — Redis > Security\n")


def test_format_hits_numbers_trims_and_omits_empty_headings() -> None:
    long_text = "word " * 400
    hits = [
        Hit(source="/kb/a.md", heading="A > B", snippet="", text="short text", score=2.0),
        Hit(source="/kb/notes.txt", heading="", snippet="", text=long_text, score=1.0),
    ]

    first, second = format_hits(hits).split("\n\n")

    assert first == "[1] a.md — A > B\nshort text"
    header, body = second.split("\n", 1)
    assert header == "[2] notes.txt"
    assert body.endswith("…")
    assert 550 <= len(body) <= 610
    assert format_hits([]) == ""


def test_collections_keep_teams_and_users_apart(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb.db")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "yaks.md").write_text("# Yaks\n\nYaks live in the Himalayas.\n")
    kb.ingest([tmp_path / "team"], "team:alpha")
    doc = kb.add_document("user:u1", "yak-notes.txt", "My yak is called Tenzing.", False)
    assert [h.source for h in kb.search("yak", collections=["team:beta"])] == []
    assert len(kb.search("yak", collections=["team:alpha", "user:u1"])) == 2
    assert [h.text for h in kb.scoped(["user:u2"]).search("yak")] == []
    assert kb.chunks("user:u2", doc.id) is None and not kb.delete("user:u2", doc.id)
    assert [d.name for d in kb.documents("user:u1")] == ["yak-notes.txt"]
    assert kb.delete("user:u1", doc.id) and kb.documents("user:u1") == []
    assert kb.count("team:alpha") == 1


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_another_users_chunk_is_never_found_however_the_search_is_filtered(
    tmp_path: Path, mode: Mode
) -> None:
    """A search reading most of the index excludes the others' collections rather than naming
    its own; one reading a small part names its own; one reading all names none. Whichever,
    another user's chunk — here the only one that matches — is never returned."""
    kb = KnowledgeBase(tmp_path / "kb.db")
    for i in range(30):
        kb.add_document(SHARED, f"n{i}.txt", f"Note {i} about gardening and soil.", False)
    kb.add_document("user:u1", "yak.txt", "My yak Tenzing grazes above the soil line.", False)
    kb.add_document("user:u2", "cat.txt", "My cat sleeps all day.", False)
    for scope in ([SHARED, "user:u2"], ["user:u2"], ["team:t", "user:u2"]):
        assert [h.text for h in kb.search("yak Tenzing", collections=scope, mode=mode)] == []
        assert all("Tenzing" not in h.text for h in kb.search("Tenzing soil", 5, scope, mode=mode))
    everyone = [SHARED, "user:u1", "user:u2"]
    assert "Tenzing" in kb.search("yak Tenzing", collections=everyone, mode=mode)[0].text


def test_a_chunk_holding_only_common_words_is_found_when_it_ranks(tmp_path: Path) -> None:
    """Chunks holding only the question's common words ("backup", "restore": in a quarter of
    the chunks) are not candidates at first; when the rare word's chunks do not fill the list,
    the best of them still come back, in BM25's order."""
    kb = KnowledgeBase(tmp_path / "kb.db", Settings(embedding_model="none"))
    for i in range(40):
        words = "backup restore" if i % 4 == 0 else "gardening soil"
        kb.add_document(SHARED, f"n{i}.txt", f"Note {i} on {words} and other matters.", False)
    kb.add_document(SHARED, "b.txt", "Backup restore: backup, restore, backup, restore.", False)
    kb.add_document(SHARED, "z.txt", "A zebra. " + "Long filler text here. " * 30, False)
    hits = kb.search("backup restore zebra", k=5, mode="keyword")
    assert len(hits) == 5
    assert hits[0].text.startswith("Backup restore: backup")
    assert all("backup" in h.text.lower() for h in hits)  # they outrank the long zebra chunk
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_an_index_from_before_collections_is_rebuilt(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE kb_files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL)")
        conn.execute("INSERT INTO kb_files VALUES ('/gone.md', 'x')")
        conn.execute("CREATE TABLE runs (id TEXT)")  # other tables are left alone
    kb = KnowledgeBase(db)
    assert kb.count() == 0 and kb.sources() == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_full_text_index_without_collections_in_it_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    kb = KnowledgeBase(db, _keyword_only())
    kb.add_document("user:u1", "yaks.txt", "Yaks live in the Himalayas.", False)
    kb.add_document("user:u2", "yaks.txt", "Yaks carry loads.", False)
    with sqlite3.connect(db) as conn:  # the full-text table as it was before it held scopes
        conn.execute("DROP TABLE kb_fts")
        conn.execute("CREATE VIRTUAL TABLE kb_fts USING fts5(heading, body)")
        conn.execute(
            "INSERT INTO kb_fts (rowid, heading, body) SELECT id, heading, text FROM kb_chunks"
        )

    reopened = KnowledgeBase(db, _keyword_only())

    assert [h.text for h in reopened.search("yaks", collections=["user:u2"])] == [
        "Yaks carry loads."
    ]


def _keyword_only() -> Settings:
    return Settings(embedding_model="none")
