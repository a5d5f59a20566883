"""The local knowledge base: markdown and text files in SQLite, found by keyword (FTS5, BM25)
and by meaning (embeddings), the two fused (:func:`fuse`, at the end of this module).

All tables are prefixed ``kb_`` because the database file is shared with other teamgraph tables:

* ``kb_files``  — one row per document, in a *collection*: its id, resolved path (or
  ``upload:<id>/<name>`` for an uploaded one), name and SHA-256 of its bytes;
* ``kb_chunks`` — the chunks, as written (collection, source, position, heading path, text);
* ``kb_fts``    — FTS5 index over heading path and text, ``rowid`` = ``kb_chunks.id``, and the
  chunk's collection as one term (``scope``), so a search ranks the chunks of its collections
  only;
* ``kb_vectors``, ``kb_meta`` — each chunk's vector per embedding model, and a counter of
  changes (:mod:`teamgraph.knowledge.vectors`).

A collection is one owner's documents: ``team:<name>`` (a team's YAML ``knowledge``),
``user:<id>`` (what a user uploaded), ``shared`` (``teamgraph ingest``). A search names the
collections it may read (:meth:`KnowledgeBase.scoped`): a run reads its team's, its user's and
the shared one, never another team's or user's.

The FTS tokenizer is ``porter unicode61 remove_diacritics 2``: ``unicode61`` splits words and
folds case and accents (``café`` matches ``cafe``), ``porter`` stems English words so ``indexes``
matches ``index``; it leaves non-ASCII tokens, such as CJK characters, untouched.

A search takes the best keyword matches and the passages nearest in meaning (embedded by the
``embedding_model`` setting, or the model a team names; ``none``: keyword only) and fuses the two
lists. A passage whose vector is missing for that model (a new model, a failed provider call) is
embedded on the next ingest or search; until then keyword search still finds it.

Connections are pooled: a call takes an idle connection (or opens one) and gives it back when
it is done, so one :class:`KnowledgeBase` can be used from several threads at once, e.g. from
asyncio code via ``asyncio.to_thread``, each thread on a connection of its own. Opening a
connection (and its settings, :func:`teamgraph.storage.sqlite.connect`) and closing the last one
(which checkpoints the WAL) cost a query more than searching did (BENCHMARKS.md). How CJK text
is indexed and how user queries are made safe is explained in :mod:`teamgraph.knowledge.fts_query`.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import math
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from teamgraph import embeddings
from teamgraph.config import Settings
from teamgraph.embeddings import Embedder
from teamgraph.errors import UsageError
from teamgraph.knowledge import vectors
from teamgraph.knowledge.chunking import Chunk, chunk_markdown, chunk_text
from teamgraph.knowledge.fts_query import (
    content_words,
    mark_cjk,
    match_phrases,
    scope_term,
    snippet,
)
from teamgraph.storage.sqlite import BUSY_TIMEOUT_S, connect
from teamgraph.text import tokenize

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
SUFFIXES = MARKDOWN_SUFFIXES | {".txt"}
HEADING_WEIGHT = 2.0  # bm25 column weight of the heading path relative to the chunk text
POOL = 20  # candidates taken from each list (at least; 3 per hit asked for)
log = logging.getLogger(__name__)
Mode = Literal["hybrid", "keyword", "vector"]

SHARED = "shared"
_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts USING fts5"
    "(heading, body, scope, tokenize = 'porter unicode61 remove_diacritics 2')"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_files (id INTEGER PRIMARY KEY, collection TEXT NOT NULL,"
    " path TEXT NOT NULL, name TEXT NOT NULL, sha256 TEXT NOT NULL, added_at TEXT NOT NULL,"
    " UNIQUE (collection, path))",
    "CREATE TABLE IF NOT EXISTS kb_chunks (id INTEGER PRIMARY KEY, collection TEXT NOT NULL,"
    " source TEXT NOT NULL, ordinal INTEGER NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_source ON kb_chunks (collection, source)",
    _FTS,
    *vectors.SCHEMA,
)
_BEFORE_COLLECTIONS = (
    "DROP TABLE IF EXISTS kb_vectors",
    "DROP TABLE IF EXISTS kb_fts",
    "DROP TABLE IF EXISTS kb_chunks",
    "DROP TABLE IF EXISTS kb_files",
)
_SEARCH = """
    SELECT c.id, c.source, c.heading, c.text, f.raw_score
    FROM (SELECT rowid, bm25(kb_fts, {weight}, 1.0, 0.0) AS raw_score FROM kb_fts
          WHERE kb_fts MATCH ? ORDER BY raw_score LIMIT ?) AS f
    JOIN kb_chunks AS c ON c.id = f.rowid
    WHERE c.collection IN ({collections})
    ORDER BY f.raw_score, c.source, c.ordinal
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
    files). ``snippet`` is a short excerpt of ``text`` on one line where the query's terms are
    densest, matched terms wrapped in ``**`` (markdown bold) and cuts marked ``…``
    (:func:`~teamgraph.knowledge.fts_query.snippet`). ``score``: higher is better — the fused score
    (hybrid), BM25 negated (keyword) or the cosine similarity (vector).
    """

    source: str
    heading: str
    snippet: str
    text: str
    score: float


@dataclass(frozen=True)
class Document:
    """One document of a collection: its id, name, where it came from, its chunk count."""

    id: int
    name: str
    source: str
    chunks: int
    added_at: str  # ISO 8601, UTC


class KnowledgeBase:
    """A hybrid (keyword and vector) index of markdown and text files in a SQLite database
    file, in collections."""

    def __init__(self, db_path: str | Path, settings: Settings | None = None) -> None:
        """Open (creating if needed) the ``kb_*`` tables in ``db_path``; other tables are left
        alone. ``:memory:`` is refused: each call opens its own connection. An index written
        before collections existed is dropped (it is rebuilt from its files: a team's on its next
        run; ``teamgraph ingest`` again for the rest). ``settings`` name the embedding model
        (``embedding_model``) and its provider's endpoint."""
        if str(db_path) == ":memory:":
            raise ValueError("KnowledgeBase needs a database file, not ':memory:'")
        self.db_path = Path(db_path)
        self.settings = settings or Settings()
        self.vectors = vectors.VectorIndex()
        self._complete: dict[tuple[str, tuple[str, ...]], int] = {}  # (model, scope) -> generation
        self._stats: _Stats | None = None
        self._idle: list[sqlite3.Connection] = []  # pooled connections, none in a transaction
        self._idle_lock = threading.Lock()
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn, conn:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(kb_files)")}
            if columns and "collection" not in columns:
                log.warning("knowledge index %s predates collections: rebuilt", self.db_path)
                for statement in _BEFORE_COLLECTIONS:
                    conn.execute(statement)
            fts = {row[1] for row in conn.execute("PRAGMA table_info(kb_fts)")}
            for statement in _SCHEMA:
                conn.execute(statement)
            if fts and "scope" not in fts:
                _rebuild_fts(conn)

    def ingest(self, paths: Iterable[str | Path], collection: str = SHARED) -> IngestReport:
        """Index files and directories (recursively: ``*.md``, ``*.markdown``, ``*.txt``) into
        ``collection``.

        Files whose content hash is unchanged are skipped; a changed file's chunks are replaced.
        Every path is checked before anything is written: a missing one raises
        :class:`FileNotFoundError` naming it, an unsupported file type :class:`UsageError`.
        Files indexed earlier under an ingested directory that no longer exist are removed.
        """
        files, directories = _collect([paths] if isinstance(paths, str | Path) else paths)
        indexed = unchanged = chunks = 0
        with self._connect() as conn:
            for file in files:
                written = _ingest_file(conn, collection, file)
                if written is None:
                    unchanged += 1
                else:
                    indexed += 1
                    chunks += written
            removed = _prune(conn, collection, directories)
            self._embed_missing(conn, self.embedder(), (collection,))
        return IngestReport(indexed, unchanged, chunks, removed)

    def add_document(self, collection: str, name: str, text: str, markdown: bool) -> Document:
        """Index an uploaded document's text as a new document of ``collection``."""
        source = f"upload:{uuid.uuid4().hex}/{name}"
        parts = chunk_markdown(text) if markdown else chunk_text(text)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._connect() as conn:
            with conn:
                for ordinal, chunk in enumerate(parts):
                    _insert_chunk(conn, collection, source, ordinal, chunk)
                cursor = conn.execute(
                    "INSERT INTO kb_files (collection, path, name, sha256, added_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (collection, source, name, digest, now := _now()),
                )
                vectors.bump(conn)
            self._embed_missing(conn, self.embedder(), (collection,))  # no write lock held
        return Document(int(cursor.lastrowid or 0), name, source, len(parts), now)

    def search(
        self,
        query: str,
        k: int = 5,
        collections: Sequence[str] = (SHARED,),
        model: str | None = None,
        mode: Mode = "hybrid",
    ) -> list[Hit]:
        """Return up to ``k`` chunks of ``collections`` for ``query``, best first.

        ``mode``: ``hybrid`` fuses the chunks matching any term of ``query`` with those nearest
        in meaning (embedded by ``model``; unset: the ``embedding_model`` setting), ``keyword``
        and ``vector`` use one list. A passage found by meaning alone must be at least
        ``embedding_min_similarity`` close. ``query`` is free text and never raises an FTS
        syntax error; a query with no searchable term (empty, punctuation only, stop words only)
        returns ``[]``.

        By keyword alone, at most half of the hits (rounded up) come from one file while other
        files match too, so a query naming two subjects ("PostgreSQL MongoDB performance")
        hears from both: BM25 alone may rank one file's chunks first on one frequent word.
        Fused with meaning the lists mix by themselves, and the cap would hide the third
        relevant passage of a question about one subject.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        phrases = match_phrases(query)
        if not phrases or not collections:
            return []
        embedder = None if mode == "keyword" else self.embedder(model)
        pool = max(k * _CANDIDATES, POOL)
        with self._connect() as conn:
            meaning = None
            if embedder is not None and mode == "hybrid":  # both legs at once, on two cores
                meaning = _legs().submit(self._nearest_apart, embedder, query, collections, pool)
            keyword = [] if mode == "vector" else self._keyword(conn, phrases, collections, pool)
            if meaning is not None:
                nearest = meaning.result()
            elif embedder is not None:
                nearest = self._nearest(conn, embedder, query, collections, pool)
            else:
                nearest = []
            ranked = _ranked(query, keyword, nearest, mode)
            rows = _rows(conn, ranked, keyword)
        best = _spread(rows, k) if mode == "keyword" or not nearest else rows[:k]
        return [
            Hit(source=src, heading=heading, snippet=snippet(text, query), text=text, score=score)
            for src, heading, text, score in best
        ]

    def _keyword(
        self, conn: sqlite3.Connection, phrases: list[str], collections: Sequence[str], n: int
    ) -> list[tuple[int, str, str, str, float]]:
        """The ``n`` best keyword matches of ``collections``: (chunk id, source, heading, text,
        -BM25).

        FTS5 scores every chunk that matches any phrase, so a question with a common word
        ("data", in half of the chunks) costs milliseconds. Two bounds on that work, neither
        changing which chunks rank first:

        * the collections are a filter of the full-text query (a ``scope`` term per chunk) —
          or, when that is less work, the *other* collections of the index are excluded, or
          nothing is, when the search reads every collection (the join checks the collections
          again, whatever the filter);
        * the candidates are the chunks holding the question's *rare* phrases (in at most
          :data:`COMMON_SHARE` of the chunks), scored by them and by its common ones; with no
          rare phrase, by its common ones. A phrase in more than half of the chunks weighs
          nothing in FTS5's BM25 (its IDF is clamped to 1e-6) and is left out of the query.
          The chunks holding only phrases left out of the candidates score less than BM25's
          ceiling for those phrases (:func:`_ceiling`): when the ``n``-th candidate scores more,
          none of them can be among the best ``n``. Otherwise the best of them (a query that
          excludes the candidates) are merged in, which is the full query's result.
        """
        stats = self._stats_at(conn)
        scope, always = _scope_filter(collections, stats)
        frequency = {p: stats.frequency(conn, p) for p in phrases}
        void = [p for p in phrases if 2 * frequency[p] > stats.chunks]
        common = [
            p for p in phrases if p not in void and frequency[p] > COMMON_SHARE * stats.chunks
        ]
        rare = [p for p in phrases if p not in void and p not in common]
        chosen, optional = (rare, common) if rare else (common, []) if common else (void, [])
        match = f"({' OR '.join(chosen)}){scope}"
        if optional:
            match += f" AND ({' OR '.join(optional)} OR {always})"
        found = _keyword(conn, match, collections, n)
        rest = [p for p in phrases if p not in chosen]
        if not rest or (len(found) >= n and found[-1][4] > _ceiling(rest, frequency, stats)):
            return found
        others = f"(({' OR '.join(rest)}) NOT ({' OR '.join(chosen)})){scope}"
        found += _keyword(conn, others, collections, n)
        return sorted(found, key=lambda row: (-row[4], row[1], row[0]))[:n]

    def _stats_at(self, conn: sqlite3.Connection) -> _Stats:
        """What the keyword search knows of the index, as of its current generation."""
        now = vectors.generation(conn)
        stats = self._stats
        if stats is None or stats.generation != now:
            rows = conn.execute("SELECT collection, count(*) FROM kb_chunks GROUP BY collection")
            counted = {str(c): int(n) for c, n in rows}
            stats = self._stats = _Stats(now, sum(counted.values()), counted)
        return stats

    def embedder(self, model: str | None = None) -> Embedder | None:
        """The embedder of ``model`` (unset: the ``embedding_model`` setting); ``None``: none."""
        return embeddings.embedder(model, self.settings)

    def _nearest_apart(
        self, embedder: Embedder, query: str, scope: Sequence[str], n: int
    ) -> list[tuple[int, float]]:
        """:meth:`_nearest` on a connection of its own (it runs beside the keyword leg)."""
        with self._connect() as conn:
            return self._nearest(conn, embedder, query, scope, n)

    def _nearest(
        self,
        conn: sqlite3.Connection,
        embedder: Embedder,
        query: str,
        scope: Sequence[str],
        n: int,
    ) -> list[tuple[int, float]]:
        """The ``n`` chunks of ``scope`` nearest to ``query`` by ``embedder``, best first; ``[]``
        when the query cannot be embedded (a provider down: keyword search goes on)."""
        try:
            wanted = embedder.embed_query(content_words(query))
        except Exception as exc:  # a provider's failure of any kind: keyword search goes on
            log.warning("knowledge search without %s: %s", embedder.name, exc)
            return []
        if self.vectors.width(conn, embedder.name) not in (0, wanted.shape[0]):
            log.warning("embedding model %s changed its dimensions: re-embedding", embedder.name)
            with conn:
                conn.execute("DELETE FROM kb_vectors WHERE model = ?", (embedder.name,))
                vectors.bump(conn)
        self._embed_missing(conn, embedder, scope)
        floor = self.settings.embedding_min_similarity
        floor = embedder.min_similarity if floor is None else floor
        return self.vectors.search(conn, embedder.name, wanted, scope, n, floor)

    def _embed_missing(
        self, conn: sqlite3.Connection, embedder: Embedder | None, scope: Sequence[str]
    ) -> None:
        """Embed the chunks of ``scope`` that have no vector of ``embedder``'s model; checked
        once per change of the index. Called outside any transaction: the model (maybe a
        provider over the network) runs while no write lock is held; each batch's vectors are
        written in a short transaction of their own. A failure is logged: those chunks wait for
        the next ingest or search, and keyword search finds them meanwhile."""
        if embedder is None:
            return
        key = (embedder.name, tuple(sorted(scope)))
        if self._complete.get(key) == vectors.generation(conn):
            return
        if len(self._complete) > _COMPLETE_MAX:  # one entry per model and scope (user) seen
            self._complete.clear()
        while todo := vectors.missing(conn, embedder.name, scope, vectors.EMBED_BATCH):
            try:
                rows = embedder.embed_documents([vectors.passage(h, t) for _, h, t in todo])
            except Exception as exc:  # a provider's failure of any kind: vectors wait
                log.warning("knowledge passages not embedded by %s: %s", embedder.name, exc)
                return
            with conn:
                vectors.store(conn, embedder.name, [chunk for chunk, _, _ in todo], rows)
        self._complete[key] = vectors.generation(conn)

    def scoped(self, collections: Sequence[str], model: str | None = None) -> Scoped:
        """A view that searches these collections only, by ``model``'s embeddings (unset: the
        ``embedding_model`` setting)."""
        return Scoped(self, tuple(dict.fromkeys(collections)), model)

    def documents(self, collection: str) -> list[Document]:
        """The documents of ``collection``, oldest first."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT f.id, f.name, f.path, (SELECT count(*) FROM kb_chunks AS c"
                " WHERE c.collection = f.collection AND c.source = f.path), f.added_at"
                " FROM kb_files AS f WHERE f.collection = ? ORDER BY f.id",
                (collection,),
            ).fetchall()
        return [Document(int(i), str(n), str(p), int(c), str(a)) for i, n, p, c, a in rows]

    def chunks(self, collection: str, document_id: int) -> list[Chunk] | None:
        """The chunks of one document of ``collection`` in order; ``None`` if it has no such
        document (another collection's documents are never found)."""
        with self._connect() as conn:
            source = _source(conn, collection, document_id)
            if source is None:
                return None
            rows = conn.execute(
                "SELECT heading, text FROM kb_chunks WHERE collection = ? AND source = ?"
                " ORDER BY ordinal",
                (collection, source),
            ).fetchall()
        return [Chunk(heading=h, text=t) for h, t in rows]

    def delete(self, collection: str, document_id: int) -> bool:
        """Remove one document of ``collection``; False when it has no such document."""
        with self._connect() as conn, conn:
            source = _source(conn, collection, document_id)
            if source is None:
                return False
            _delete_source(conn, collection, source)
        return True

    def count(self, collection: str | None = None) -> int:
        """Number of chunks in the index (in ``collection``, if given)."""
        with self._connect() as conn:
            if collection is None:
                row = conn.execute("SELECT count(*) FROM kb_chunks").fetchone()
            else:
                query = "SELECT count(*) FROM kb_chunks WHERE collection = ?"
                row = conn.execute(query, (collection,)).fetchone()
        return int(row[0])

    def sources(self, collection: str = SHARED) -> list[str]:
        """Paths of the files ingested into ``collection``, sorted."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT path FROM kb_files WHERE collection = ? ORDER BY path", (collection,)
            ).fetchall()
        return [str(row[0]) for row in rows]

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """An idle pooled connection (or a new one), given back afterwards. One that saw an
        exception, or is still in a transaction, is closed instead (rolling back)."""
        with self._idle_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = connect(self.db_path, BUSY_TIMEOUT_S, autocommit=False)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        if conn.in_transaction:
            conn.close()
            return
        with self._idle_lock:
            if len(self._idle) < _IDLE_MAX:
                self._idle.append(conn)
                return
        conn.close()


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _legs() -> ThreadPoolExecutor:
    """The pool the vector leg of a hybrid search runs on while the keyword leg runs on the
    caller's thread (SQLite's FTS5 and numpy both release the GIL: the two overlap on two cores).
    One per process: a forked copy has none of its parent's threads."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            legs = ThreadPoolExecutor(max_workers=4, thread_name_prefix="knowledge")
            _pool = (os.getpid(), legs)
        return _pool[1]


@dataclass(frozen=True)
class Scoped:
    """A knowledge base seen through some of its collections (what one run may read)."""

    base: KnowledgeBase
    collections: tuple[str, ...]
    model: str | None = None  # embedding model; None: the embedding_model setting

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.base.search(query, k, self.collections, self.model)


_CANDIDATES = 3  # rows fetched per hit returned, to choose among
COMMON_SHARE = 0.15  # a phrase in more of the chunks than this is common (chosen on the
# benchmark corpus: 0.1 and 0.2 left more questions to the slower second query)
_FREQUENCIES_MAX = 100_000


@dataclass
class _Stats:
    """The index at one generation: its chunks, per collection, and how many chunks hold each
    phrase asked so far."""

    generation: int
    chunks: int
    collections: dict[str, int]
    frequencies: dict[str, int] = field(default_factory=dict)

    def frequency(self, conn: sqlite3.Connection, phrase: str) -> int:
        found = self.frequencies.get(phrase)
        if found is None:
            row = conn.execute("SELECT count(*) FROM kb_fts WHERE kb_fts MATCH ?", (phrase,))
            found = int(row.fetchone()[0])
            if len(self.frequencies) >= _FREQUENCIES_MAX:
                self.frequencies.clear()
            self.frequencies[phrase] = found
        return found


def _scope_filter(collections: Sequence[str], stats: _Stats) -> tuple[str, str]:
    """The full-text filter that keeps the chunks of ``collections`` (and maybe more) — their
    scope terms, or the other collections' excluded, whichever names fewer chunks (FTS5 reads
    every chunk of each term it is given); none when the index holds no other collection — and
    a clause every chunk it keeps satisfies."""
    others = [c for c in stats.collections if c not in collections]
    every = f"scope : ({_scope_phrases(stats.collections)})"
    kept = sum(stats.collections.get(c, 0) for c in collections)
    if not others:
        return "", every
    if sum(stats.collections[c] for c in others) < kept:
        return f" NOT scope : ({_scope_phrases(others)})", every
    scoped = f"scope : ({_scope_phrases(collections)})"
    return f" AND {scoped}", scoped


def _ceiling(phrases: Sequence[str], frequency: dict[str, int], stats: _Stats) -> float:
    """More than any chunk can score on ``phrases`` (BM25 as FTS5 computes it, with any column
    weights): each phrase adds ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length /
    average))``, below ``idf * (k1 + 1)`` whatever its frequency ``tf`` in the chunk; ``idf``
    is ``log((N - n + 0.5) / (n + 0.5))`` for a phrase in ``n`` of the ``N`` chunks, at least
    1e-6."""
    k1, chunks = 1.2, stats.chunks  # k1: FTS5's bm25 constant
    return sum(
        (k1 + 1) * max(math.log((chunks - frequency[p] + 0.5) / (frequency[p] + 0.5)), 1e-6)
        for p in phrases
    )


def _scope_phrases(collections: Iterable[str]) -> str:
    return " OR ".join(f'"{scope_term(c)}"' for c in collections)


_COMPLETE_MAX = 10_000
_IDLE_MAX = 4  # pooled connections kept open (one per thread searching at once)


def _spread(rows: Sequence[Any], k: int) -> list[Any]:
    """The best ``k`` rows (best first), at most ``ceil(k / 2)`` from one source while rows from
    other sources remain; short of ``k``, the next best rows fill the gap."""
    cap = -(-k // 2)
    taken: list[Any] = []
    per: dict[str, int] = {}
    for row in rows:
        if len(taken) < k and per.get(row[0], 0) < cap:
            taken.append(row)
            per[row[0]] = per.get(row[0], 0) + 1
    rest = [row for row in rows if row not in taken]
    taken += rest[: k - len(taken)]
    order = {id(row): i for i, row in enumerate(rows)}
    return sorted(taken, key=lambda row: order[id(row)])


def _keyword(
    conn: sqlite3.Connection, match: str, collections: Sequence[str], n: int
) -> list[tuple[int, str, str, str, float]]:
    """The ``n`` best chunks for the full-text query ``match``: (chunk id, source, heading,
    text, -BM25); the join keeps the chunks of ``collections`` only."""
    sql = _SEARCH.format(weight=HEADING_WEIGHT, collections=",".join("?" * len(collections)))
    rows = conn.execute(sql, (match, n, *collections)).fetchall()
    return [(int(i), s, h, t, -raw) for i, s, h, t, raw in rows]


def _ranked(
    query: str, keyword: Sequence[tuple[Any, ...]], nearest: list[tuple[int, float]], mode: Mode
) -> list[tuple[int, float]]:
    """Chunk ids with their scores, best first, as ``mode`` ranks them."""
    if mode == "keyword" or not nearest:
        return [(row[0], row[4]) for row in keyword]
    if mode == "vector" or not keyword:
        return nearest
    covered = coverage(query, ((row[0], f"{row[2]} {row[3]}") for row in keyword))
    return fuse([row[0] for row in keyword], [chunk for chunk, _ in nearest], covered)


def _rows(
    conn: sqlite3.Connection, ranked: list[tuple[int, float]], keyword: Sequence[tuple[Any, ...]]
) -> list[tuple[str, str, str, float]]:
    """(source, heading, text, score) of the ranked chunks, in order."""
    known = {row[0]: row[1:4] for row in keyword}
    wanted = [chunk for chunk, _ in ranked if chunk not in known]
    if wanted:
        marks = ",".join("?" * len(wanted))
        sql = f"SELECT id, source, heading, text FROM kb_chunks WHERE id IN ({marks})"
        found = conn.execute(sql, wanted).fetchall()
        known |= {int(i): (s, h, t) for i, s, h, t in found}
    return [(*known[chunk], score) for chunk, score in ranked if chunk in known]


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _source(conn: sqlite3.Connection, collection: str, document_id: int) -> str | None:
    row = conn.execute(
        "SELECT path FROM kb_files WHERE id = ? AND collection = ?", (document_id, collection)
    ).fetchone()
    return None if row is None else str(row[0])


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


def _ingest_file(conn: sqlite3.Connection, collection: str, path: Path) -> int | None:
    """(Re)index one file; return the number of chunks written, or ``None`` if unchanged."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    key = str(path)
    row = conn.execute(
        "SELECT sha256 FROM kb_files WHERE collection = ? AND path = ?", (collection, key)
    ).fetchone()
    if row is not None and row[0] == digest:
        return None
    chunks = _chunk(path, data.decode("utf-8-sig", errors="replace"))
    with conn:
        _delete_source(conn, collection, key)
        for ordinal, chunk in enumerate(chunks):
            _insert_chunk(conn, collection, key, ordinal, chunk)
        conn.execute(
            "INSERT INTO kb_files (collection, path, name, sha256, added_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (collection, key, path.name, digest, _now()),
        )
    return len(chunks)


def _chunk(path: Path, content: str) -> list[Chunk]:
    if path.suffix.lower() in MARKDOWN_SUFFIXES:
        return chunk_markdown(content)
    return chunk_text(content)


def _insert_chunk(
    conn: sqlite3.Connection, collection: str, source: str, ordinal: int, chunk: Chunk
) -> None:
    cursor = conn.execute(
        "INSERT INTO kb_chunks (collection, source, ordinal, heading, text) VALUES (?, ?, ?, ?, ?)",
        (collection, source, ordinal, chunk.heading, chunk.text),
    )
    conn.execute(
        "INSERT INTO kb_fts (rowid, heading, body, scope) VALUES (?, ?, ?, ?)",
        (cursor.lastrowid, mark_cjk(chunk.heading), mark_cjk(chunk.text), scope_term(collection)),
    )


def _rebuild_fts(conn: sqlite3.Connection) -> None:
    """Re-create the full-text index from the chunks (an index written before the full-text
    table held each chunk's collection)."""
    log.warning("knowledge full-text index rebuilt with collections")
    conn.execute("DROP TABLE kb_fts")
    conn.execute(_FTS)
    rows = conn.execute("SELECT id, collection, heading, text FROM kb_chunks").fetchall()
    conn.executemany(
        "INSERT INTO kb_fts (rowid, heading, body, scope) VALUES (?, ?, ?, ?)",
        [(i, mark_cjk(h), mark_cjk(t), scope_term(c)) for i, c, h, t in rows],
    )


def _delete_source(conn: sqlite3.Connection, collection: str, source: str) -> None:
    where = "collection = ? AND source = ?"
    conn.execute(
        f"DELETE FROM kb_fts WHERE rowid IN (SELECT id FROM kb_chunks WHERE {where})",
        (collection, source),
    )
    vectors.delete(conn, collection, source)
    conn.execute(f"DELETE FROM kb_chunks WHERE {where}", (collection, source))
    conn.execute("DELETE FROM kb_files WHERE collection = ? AND path = ?", (collection, source))
    vectors.bump(conn)


def _prune(conn: sqlite3.Connection, collection: str, directories: list[Path]) -> int:
    """Drop indexed files under ``directories`` that no longer exist; return how many."""
    if not directories:
        return 0
    rows = conn.execute("SELECT path FROM kb_files WHERE collection = ?", (collection,))
    known = [Path(row[0]) for row in rows.fetchall() if not str(row[0]).startswith("upload:")]
    gone = [
        path
        for path in known
        if any(path.is_relative_to(d) for d in directories) and not path.exists()
    ]
    with conn:
        for path in gone:
            _delete_source(conn, collection, str(path))
    return len(gone)


# --- fusion --------------------------------------------------------------------------------------
# Hybrid ranking: keyword (BM25) and vector results fused by reciprocal rank.
#
# Each list gives a passage ``1 / (RRF_K + rank)`` (rank from 1); a passage found by both adds
# both. A keyword hit counts in proportion to the share of the question's terms it holds
# (*coverage*): a passage matching one common word of a question that shares no word with its
# answer (a paraphrase) weighs little, one matching every term of a keyword question weighs fully.
# Plain reciprocal rank fusion lets such one-word matches push the passages found by meaning out
# of the first five; coverage keeps keyword questions as good as keyword search alone and
# paraphrases as good as vector search alone (evals/retrieval.py measures both).
#
# ``RRF_K`` is 10 rather than the customary 60: with lists of twenty, a smaller constant keeps the
# difference between the first and the fifth place worth something. Both values were chosen on
# the development set of the retrieval eval, never on its held-out set.

RRF_K = 10


def fuse(
    keyword: Sequence[int], vector: Sequence[int], coverage: Mapping[int, float]
) -> list[tuple[int, float]]:
    """Chunk ids of both lists (each best first) in fused order, with their fused scores."""
    scores: dict[int, float] = {}
    for rank, chunk in enumerate(keyword, start=1):
        scores[chunk] = scores.get(chunk, 0.0) + coverage.get(chunk, 0.0) / (RRF_K + rank)
    for rank, chunk in enumerate(vector, start=1):
        scores[chunk] = scores.get(chunk, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def coverage(query: str, passages: Iterable[tuple[int, str]]) -> dict[int, float]:
    """For each (chunk id, text): the share of the query's terms (stemmed words, CJK bigrams)
    found in the text."""
    wanted = set(tokenize(query))
    if not wanted:
        return {}
    return {chunk: len(wanted & _terms(text)) / len(wanted) for chunk, text in passages}


@lru_cache(maxsize=1 << 14)  # a passage's terms, computed once however often it is a candidate
def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))
