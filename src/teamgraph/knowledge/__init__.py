"""Local knowledge base searched by researcher agents (SQLite FTS5, BM25 ranking)."""

from teamgraph.knowledge.index import Hit, IngestReport, KnowledgeBase

__all__ = ["Hit", "IngestReport", "KnowledgeBase"]
