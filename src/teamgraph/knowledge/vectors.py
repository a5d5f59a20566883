"""Passage vectors: kept beside the chunks in SQLite, searched exactly in memory.

* ``kb_vectors`` — one row per (model, chunk): the chunk's unit vector as ``float32`` bytes.
  A vector is only ever compared with a query embedded by the same model, so changing the model
  re-embeds (chunks without a vector of the model in use are embedded on the next ingest or
  search) and never mixes vectors of two models; another model's vectors stay for the teams that
  use it.
* ``kb_meta`` — ``generation``, raised by every write to the index, so that each process knows
  when its in-memory copy is stale (another process may have ingested).

Search is exact: the vectors of one model are held in memory as one matrix (reloaded when the
generation moves), the query is compared with every row
(:func:`teamgraph.embeddings.similarity`), and rows of other collections are masked out before
ranking. At 10,000 passages of 256 dimensions that is a 10 MB matrix and about a millisecond
per query (BENCHMARKS.md). ``sqlite-vec`` was the
alternative; it needs ``sqlite3`` built with loadable extensions, which many Pythons (this
project's CI's, macOS's system one) lack.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamgraph.embeddings import similarity

if TYPE_CHECKING:
    from teamgraph.embeddings import Vectors

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kb_vectors (model TEXT NOT NULL, chunk_id INTEGER NOT NULL,"
    " vector BLOB NOT NULL, PRIMARY KEY (model, chunk_id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS kb_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO kb_meta (key, value) VALUES ('generation', 0)",
)
EMBED_BATCH = 256  # chunks embedded (and written) at a time


def passage(heading: str, text: str) -> str:
    """What is embedded for a chunk: its heading path, then its text."""
    return f"{heading}\n{text}" if heading else text


def bump(conn: sqlite3.Connection) -> None:
    """Mark the index changed (inside the writing transaction)."""
    conn.execute("UPDATE kb_meta SET value = value + 1 WHERE key = 'generation'")


def generation(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM kb_meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row else 0


def missing(
    conn: sqlite3.Connection, model: str, collections: Sequence[str], limit: int
) -> list[tuple[int, str, str]]:
    """Up to ``limit`` chunks of ``collections`` that have no vector of ``model``: (id,
    heading, text)."""
    marks = ",".join("?" * len(collections))
    rows = conn.execute(
        f"SELECT c.id, c.heading, c.text FROM kb_chunks AS c WHERE c.collection IN ({marks})"
        " AND NOT EXISTS (SELECT 1 FROM kb_vectors AS v WHERE v.model = ? AND v.chunk_id = c.id)"
        " ORDER BY c.id LIMIT ?",
        (*collections, model, limit),
    ).fetchall()
    return [(int(i), str(h), str(t)) for i, h, t in rows]


def store(conn: sqlite3.Connection, model: str, ids: Sequence[int], vectors: Vectors) -> None:
    """Write the vectors of chunks ``ids`` (rows of ``vectors``) for ``model``; a chunk deleted
    meanwhile gets none."""
    conn.executemany(
        "INSERT OR REPLACE INTO kb_vectors (model, chunk_id, vector)"
        " SELECT ?, id, ? FROM kb_chunks WHERE id = ?",
        [(model, vector.tobytes(), chunk) for chunk, vector in zip(ids, vectors, strict=True)],
    )
    bump(conn)


def delete(conn: sqlite3.Connection, collection: str, source: str) -> None:
    """Drop the vectors of one document's chunks (before the chunks themselves)."""
    conn.execute(
        "DELETE FROM kb_vectors WHERE chunk_id IN"
        " (SELECT id FROM kb_chunks WHERE collection = ? AND source = ?)",
        (collection, source),
    )


@dataclass(frozen=True)
class _Matrix:
    """One model's vectors as loaded at ``generation``: chunk ids, their collections (as codes),
    unit rows."""

    generation: int
    ids: Any  # int64 array
    codes: Any  # int32 array: the collection of each row, coded
    code_of: dict[str, int]
    rows: Any  # float32 matrix, one unit row per id

    @property
    def width(self) -> int:
        return int(self.rows.shape[1])


class VectorIndex:
    """The in-memory vectors of a knowledge base, one matrix per model, shared by the threads
    that search it."""

    def __init__(self) -> None:
        self._matrices: dict[str, _Matrix] = {}
        self._lock = threading.Lock()

    def width(self, conn: sqlite3.Connection, model: str) -> int:
        """The dimensions of ``model``'s stored vectors (0: none stored)."""
        return self._current(conn, model).width

    def search(
        self,
        conn: sqlite3.Connection,
        model: str,
        query: Vectors,
        collections: Sequence[str],
        n: int,
        floor: float,
    ) -> list[tuple[int, float]]:
        """The ``n`` chunks of ``collections`` nearest to ``query`` with a cosine similarity
        of at least ``floor``: (chunk id, similarity), best first."""
        import numpy as np

        matrix = self._current(conn, model)
        wanted = [matrix.code_of[c] for c in collections if c in matrix.code_of]
        if not wanted or matrix.width != query.shape[0]:
            return []
        scores = similarity(matrix.rows, query)
        scores[~np.isin(matrix.codes, wanted) | (scores < floor)] = -np.inf
        top = np.argpartition(-scores, min(n, len(scores) - 1))[:n]
        top = top[np.isfinite(scores[top])]
        best = top[np.lexsort((matrix.ids[top], -scores[top]))]
        return [(int(matrix.ids[i]), float(scores[i])) for i in best]

    def _current(self, conn: sqlite3.Connection, model: str) -> _Matrix:
        now = generation(conn)
        with self._lock:
            matrix = self._matrices.get(model)
            if matrix is None or matrix.generation != now:
                matrix = self._matrices[model] = _load(conn, model, now)
            return matrix


def _load(conn: sqlite3.Connection, model: str, at: int) -> _Matrix:
    import numpy as np

    rows = conn.execute(
        "SELECT v.chunk_id, c.collection, v.vector FROM kb_vectors AS v"
        " JOIN kb_chunks AS c ON c.id = v.chunk_id WHERE v.model = ? ORDER BY v.chunk_id",
        (model,),
    ).fetchall()
    width = len(rows[0][2]) // 4 if rows else 0
    rows = [row for row in rows if len(row[2]) == width * 4]  # one model, one width
    code_of = {name: code for code, name in enumerate(sorted({row[1] for row in rows}))}
    vectors = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.float32)
    return _Matrix(
        generation=at,
        ids=np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
        codes=np.fromiter((code_of[row[1]] for row in rows), dtype=np.int32, count=len(rows)),
        code_of=code_of,
        rows=vectors.reshape(len(rows), width),
    )
