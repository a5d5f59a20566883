"""Application tables (SQLAlchemy 2, async)."""
