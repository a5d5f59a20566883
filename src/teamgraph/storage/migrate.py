"""Schema migrations (Alembic), run on start-up and by ``teamgraph db upgrade``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the app tables to ``revision``, all or nothing: a process killed half-way leaves the
    schema as it was (on SQLite too, whose driver runs DDL outside transactions unless one was
    begun explicitly), and concurrent processes upgrade one after the other."""
    async with engine.begin() as conn:
        await conn.run_sync(lambda sync: _upgrade(sync, revision))


def _upgrade(connection: Connection, revision: str) -> None:
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    command.upgrade(alembic_config(connection), revision)
