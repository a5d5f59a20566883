"""Everything a run persists to, opened together from one ``DATABASE_URL``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.sqlite.aio import AsyncSqliteStore
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from teamgraph.config import Settings
from teamgraph.knowledge import KnowledgeBase
from teamgraph.ledger import SqliteLedger, StepLedger
from teamgraph.storage.runs import RunRepository

# WAL with synchronous=NORMAL: a committed transaction survives the process being killed (the
# durability runs need); only an OS crash or power loss may lose the last commits.
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
)


def _set_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


@dataclass
class Backend:
    """Checkpointer, store (shared memory), step ledger, run table and knowledge index."""

    checkpointer: AsyncSqliteSaver
    store: AsyncSqliteStore
    ledger: StepLedger
    runs: RunRepository
    knowledge: KnowledgeBase


@asynccontextmanager
async def open_backend(settings: Settings) -> AsyncIterator[Backend]:
    """Open (and create if needed) every table in the SQLite file of ``settings``."""
    path = settings.sqlite_path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(path)))
        store = await stack.enter_async_context(AsyncSqliteStore.from_conn_string(str(path)))
        await store.setup()
        await saver.setup()
        for conn in (saver.conn, store.conn):
            for pragma in SQLITE_PRAGMAS:
                await conn.execute(pragma)
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
        event.listen(engine.sync_engine, "connect", _set_pragmas)
        stack.push_async_callback(engine.dispose)
        runs = RunRepository(engine)
        await runs.create_tables()
        ledger = SqliteLedger(path)
        stack.callback(ledger.close)
        yield Backend(saver, store, ledger, runs, KnowledgeBase(path))
