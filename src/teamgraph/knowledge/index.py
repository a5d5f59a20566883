"""The local knowledge base: markdown and text files in a SQLite FTS5 index, ranked by BM25.

All tables are prefixed ``kb_`` because the database file is shared with other teamgraph tables:

* ``kb_files``  — one row per ingested file: resolved path and SHA-256 of its bytes;
* ``kb_chunks`` — the chunks, as written (source path, position, heading path, text);
* ``kb_fts``    — FTS5 index over heading path and text, ``rowid`` = ``kb_chunks.id``.

The FTS tokenizer is ``porter unicode61 remove_diacritics 2``: ``unicode61`` splits words and
folds case and accents (``café`` matches ``cafe``), ``porter`` stems English words so ``indexes``
matches ``index``; it leaves non-ASCII tokens, such as CJK characters, untouched.

Every call opens its own short-lived connection, so one :class:`KnowledgeBase` can be used from
several threads, e.g. from asyncio code via ``asyncio.to_thread``. How CJK text is indexed and how
user queries are made safe is explained in :mod:`teamgraph.knowledge.text`.
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from teamgraph.errors import UsageError
from teamgraph.knowledge.chunking import Chunk, chunk_markdown, chunk_text
from teamgraph.knowledge.text import build_match_query, mark_cjk, unmark_cjk

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
SUFFIXES = MARKDOWN_SUFFIXES | {".txt"}
HEADING_WEIGHT = 2.0  # bm25 column weight of the heading path relative to the chunk text
SNIPPET_TOKENS = 24

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_chunks (id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
    " ordinal INTEGER NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_source ON kb_chunks (source)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts USING fts5"
    "(heading, body, tokenize = 'porter unicode61 remove_diacritics 2')",
)
_SEARCH = f"""
    SELECT c.source, c.heading, c.text,
           snippet(kb_fts, 1, '**', '**', '…', {SNIPPET_TOKENS}),
           bm25(kb_fts, {HEADING_WEIGHT}, 1.0) AS raw_score
    FROM kb_fts JOIN kb_chunks AS c ON c.id = kb_fts.rowid
    WHERE kb_fts MATCH ?
    ORDER BY raw_score, c.source, c.ordinal
    LIMIT ?
"""


@dataclass(frozen=True)
class IngestReport:
    """What one :meth:`KnowledgeBase.ingest` call did. ``chunks`` counts the chunks written by
    this call (unchanged files add none); ``files_removed`` counts files that had vanished from
    an ingested directory and were dropped from the index."""

    files_indexed: int = 0
    files_unchanged: int = 0
    chunks: int = 0
    files_removed: int = 0


@dataclass(frozen=True)
class Hit:
    """One search result.

    ``source`` is the resolved path of the file, ``heading`` its heading path (``""`` for text
    files). ``snippet`` is a short FTS5 excerpt of ``text`` on one line, matched terms wrapped in
    ``**`` (markdown bold) and cuts marked ``…``. ``score`` is BM25 negated: higher is better.
    """

    source: str
    heading: str
    snippet: str
    text: str
    score: float


class KnowledgeBase:
    """A full-text index of markdown and text files in a SQLite database file."""

    def __init__(self, db_path: str | Path) -> None:
        """Open (creating if needed) the ``kb_*`` tables in ``db_path``; other tables are left
        alone. ``:memory:`` is refused: each call opens its own connection."""
        if str(db_path) == ":memory:":
            raise ValueError("KnowledgeBase needs a database file, not ':memory:'")
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn, conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def ingest(self, paths: Iterable[str | Path]) -> IngestReport:
        """Index files and directories (recursively: ``*.md``, ``*.markdown``, ``*.txt``).

        Files whose content hash is unchanged are skipped; a changed file's chunks are replaced.
        Every path is checked before anything is written: a missing one raises
        :class:`FileNotFoundError` naming it, an unsupported file type :class:`UsageError`.
        Files indexed earlier under an ingested directory that no longer exist are removed.
        """
        files, directories = _collect([paths] if isinstance(paths, str | Path) else paths)
        indexed = unchanged = chunks = 0
        with self._connect() as conn:
            for file in files:
                written = _ingest_file(conn, file)
                if written is None:
                    unchanged += 1
                else:
                    indexed += 1
                    chunks += written
            removed = _prune(conn, directories)
        return IngestReport(indexed, unchanged, chunks, removed)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """Return up to ``k`` chunks matching any term of ``query``, best first.

        ``query`` is free text and never raises an FTS syntax error; a query with no searchable
        term (empty, punctuation only, stop words only) returns ``[]``.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        match = build_match_query(query)
        if match is None:
            return []
        with self._connect() as conn:
            rows = conn.execute(_SEARCH, (match, k)).fetchall()
        return [
            Hit(source=source, heading=heading, snippet=_clean(snippet), text=text, score=-raw)
            for source, heading, text, snippet, raw in rows
        ]

    def count(self) -> int:
        """Number of chunks in the index."""
        with self._connect() as conn:
            row = conn.execute("SELECT count(*) FROM kb_chunks").fetchone()
        return int(row[0])

    def sources(self) -> list[str]:
        """Paths of all ingested files, sorted."""
        with self._connect() as conn:
            rows = conn.execute("SELECT path FROM kb_files ORDER BY path").fetchall()
        return [str(row[0]) for row in rows]

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.db_path, timeout=30.0)) as conn:
            yield conn


def _clean(snippet: str) -> str:
    """Make an FTS5 snippet readable: drop CJK markers, fold line breaks into single spaces."""
    return " ".join(unmark_cjk(snippet).split())


def _collect(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path]]:
    """Resolve ``paths`` into the files to ingest and the directories they came from."""
    files: dict[Path, None] = {}
    directories: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "knowledge source not found", str(raw))
        path = path.resolve()
        if path.is_dir():
            directories.append(path)
            files.update(dict.fromkeys(_walk(path)))
        elif path.suffix.lower() in SUFFIXES:
            files[path] = None
        else:
            supported = ", ".join(sorted(SUFFIXES))
            raise UsageError(f"cannot ingest {raw}: supported file types are {supported}")
    return list(files), directories


def _walk(directory: Path) -> list[Path]:
    """Supported files under ``directory``, sorted; hidden files and directories are skipped."""
    return sorted(
        path
        for path in directory.rglob("*")
        if path.suffix.lower() in SUFFIXES
        and path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(directory).parts)
    )


def _ingest_file(conn: sqlite3.Connection, path: Path) -> int | None:
    """(Re)index one file; return the number of chunks written, or ``None`` if unchanged."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    key = str(path)
    row = conn.execute("SELECT sha256 FROM kb_files WHERE path = ?", (key,)).fetchone()
    if row is not None and row[0] == digest:
        return None
    chunks = _chunk(path, data.decode("utf-8-sig", errors="replace"))
    with conn:
        _delete_source(conn, key)
        for ordinal, chunk in enumerate(chunks):
            _insert_chunk(conn, key, ordinal, chunk)
        conn.execute("INSERT INTO kb_files (path, sha256) VALUES (?, ?)", (key, digest))
    return len(chunks)


def _chunk(path: Path, content: str) -> list[Chunk]:
    if path.suffix.lower() in MARKDOWN_SUFFIXES:
        return chunk_markdown(content)
    return chunk_text(content)


def _insert_chunk(conn: sqlite3.Connection, source: str, ordinal: int, chunk: Chunk) -> None:
    cursor = conn.execute(
        "INSERT INTO kb_chunks (source, ordinal, heading, text) VALUES (?, ?, ?, ?)",
        (source, ordinal, chunk.heading, chunk.text),
    )
    conn.execute(
        "INSERT INTO kb_fts (rowid, heading, body) VALUES (?, ?, ?)",
        (cursor.lastrowid, mark_cjk(chunk.heading), mark_cjk(chunk.text)),
    )


def _delete_source(conn: sqlite3.Connection, source: str) -> None:
    conn.execute(
        "DELETE FROM kb_fts WHERE rowid IN (SELECT id FROM kb_chunks WHERE source = ?)", (source,)
    )
    conn.execute("DELETE FROM kb_chunks WHERE source = ?", (source,))
    conn.execute("DELETE FROM kb_files WHERE path = ?", (source,))


def _prune(conn: sqlite3.Connection, directories: list[Path]) -> int:
    """Drop indexed files under ``directories`` that no longer exist; return how many."""
    if not directories:
        return 0
    known = [Path(row[0]) for row in conn.execute("SELECT path FROM kb_files").fetchall()]
    gone = [
        path
        for path in known
        if any(path.is_relative_to(d) for d in directories) and not path.exists()
    ]
    with conn:
        for path in gone:
            _delete_source(conn, str(path))
    return len(gone)
