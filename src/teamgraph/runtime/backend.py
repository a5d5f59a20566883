"""Everything a run persists to, opened together from one ``DATABASE_URL``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.sqlite.aio import AsyncSqliteStore
from sqlalchemy.ext.asyncio import create_async_engine

from teamgraph.config import Settings
from teamgraph.knowledge import KnowledgeBase
from teamgraph.storage.runs import RunRepository


@dataclass
class Backend:
    """Checkpointer, store (step ledger, memory), run table and knowledge index."""

    checkpointer: AsyncSqliteSaver
    store: AsyncSqliteStore
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
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
        stack.push_async_callback(engine.dispose)
        runs = RunRepository(engine)
        await runs.create_tables()
        yield Backend(saver, store, runs, KnowledgeBase(path))
