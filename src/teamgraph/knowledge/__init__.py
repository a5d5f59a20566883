"""Local knowledge base searched by researcher agents (SQLite FTS5, BM25 ranking)."""

from teamgraph.knowledge.index import SHARED, Document, Hit, IngestReport, KnowledgeBase, Scoped

__all__ = ["SHARED", "Document", "Hit", "IngestReport", "KnowledgeBase", "Scoped"]
