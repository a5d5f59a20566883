"""Everything a run persists to, opened together from one ``DATABASE_URL``."""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from teamgraph.config import Settings
from teamgraph.durable import JournalStore, StepLedger
from teamgraph.errors import UsageError
from teamgraph.knowledge import KnowledgeBase
from teamgraph.storage import sqlite
from teamgraph.storage.cached_plans import PlanCacheStore, SqlitePlanCache, StorePlanCache
from teamgraph.storage.checkpoints import SqliteCheckpointer, with_crash_points
from teamgraph.storage.direct import Direct
from teamgraph.storage.outages import check_if_disturbed, purged_on_outage, replace_if_disturbed
from teamgraph.storage.rates import SharedRates
from teamgraph.storage.run_records import SqliteRecords, StoreJournal, StoreStepLedger
from teamgraph.storage.run_store import PostgresRunStore, RunStore, SqlRunStore

LEND_WAIT_S = 5.0  # how long a query waits for a pooled PostgreSQL connection (then: outage)
# psycopg_pool retries a failed connection after 1, 2, 4, 8 … s; giving an attempt up after 2 s
# makes the next request start a fresh one at once: the pool is back within ~1 s of the database
RECONNECT_S = 2.0
ASYNC_WAIT_S = 5.0  # how long aiosqlite's connections (app tables, the store) wait for a lock


@dataclass
class Backend:
    """Checkpointer, store (shared memory), step ledger, journal, run store and knowledge
    index."""

    checkpointer: BaseCheckpointSaver[Any]
    store: BaseStore
    ledger: StepLedger
    journal: JournalStore
    runs: RunStore
    knowledge: KnowledgeBase
    engine: AsyncEngine
    direct: Direct  # hot-path reads and short writes that never wait on the event loop
    rates: SharedRates | None = None  # provider rates shared by every process (PostgreSQL)
    plans: PlanCacheStore | None = None  # the plan cache's entries


@asynccontextmanager
async def open_backend(settings: Settings) -> AsyncIterator[Backend]:
    """Open (and create or migrate) everything ``DATABASE_URL`` names: a SQLite file (default)
    or a PostgreSQL database (``pip install "teamgraph[postgres]"``)."""
    if settings.is_postgres:
        async with _open_postgres(settings) as backend:
            yield backend
    else:
        async with _open_sqlite(settings) as backend:
            yield backend


async def _set_up(conn: Any, setup: Callable[[], Awaitable[None]]) -> None:
    """LangGraph's SQLite set-up, safe when another process or backend sets the same new file
    up at the same time: the loser of the race sees a migration the other applied ("UNIQUE
    constraint failed: *_migrations.v", "duplicate column name"), rolls back and reads the
    migrations again."""
    for attempt in range(SETUP_ATTEMPTS):
        try:
            return await setup()
        except (sqlite3.IntegrityError, sqlite3.OperationalError) as exc:
            racing = isinstance(exc, sqlite3.IntegrityError) or "duplicate column" in str(exc)
            if not racing or attempt == SETUP_ATTEMPTS - 1:
                raise
            await conn.rollback()
            await asyncio.sleep(0.05 * (attempt + 1))


SETUP_ATTEMPTS = 5
_SETUP_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _setting_up(path: Path) -> asyncio.Lock:
    """One set-up of a file at a time in this process (backends opened at once, e.g. runs
    started together on a new file); other processes are met by :func:`_set_up`'s retries."""
    locks = _SETUP_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(path, asyncio.Lock())


@asynccontextmanager
async def _open_sqlite(settings: Settings) -> AsyncIterator[Backend]:
    path = settings.sqlite_path.resolve()
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(AsyncSqliteStore.from_conn_string(str(path)))
        async with _setting_up(path):
            for statement in sqlite.statements(ASYNC_WAIT_S):
                await store.conn.execute(statement)
            await _set_up(store.conn, store.setup)
            # in threads: setting tables up may wait for another backend's write to commit,
            # which needs this event loop to go on
            saver = await asyncio.to_thread(SqliteCheckpointer, path)
            stack.callback(saver.close)
        # connections kept open: a request burst must not open (and close) overflow connections,
        # each a thread, a file open and the pragmas
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}", pool_size=20, max_overflow=20)
        event.listen(engine.sync_engine, "connect", sqlite.on_connect(ASYNC_WAIT_S))
        stack.push_async_callback(engine.dispose)
        direct = Direct(engine, path)
        stack.callback(direct.close)
        runs = SqlRunStore(engine, direct)
        await runs.setup()
        records = await asyncio.to_thread(SqliteRecords, path)
        stack.callback(records.close)
        knowledge = await asyncio.to_thread(KnowledgeBase, path, settings)
        plans = await asyncio.to_thread(SqlitePlanCache, records.lanes)
        yield Backend(
            saver,
            store,
            records.ledger,
            records.journal,
            runs,
            knowledge,
            engine,
            direct,
            plans=plans,
        )


@asynccontextmanager
async def _open_postgres(settings: Settings) -> AsyncIterator[Backend]:
    """Checkpointer, store, step ledger and app tables in one PostgreSQL database; the
    knowledge index stays a local SQLite file (``TEAMGRAPH_KNOWLEDGE_PATH``)."""
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:
        raise UsageError(
            'PostgreSQL needs extra packages: pip install "teamgraph[postgres]"'
        ) from None
    url = settings.postgres_url
    async with AsyncExitStack() as stack:
        pool = await stack.enter_async_context(_langgraph_pool(url, settings.db_pool_size))
        stack.enter_context(purged_on_outage(pool.check))
        saver = with_crash_points(AsyncPostgresSaver)(pool)
        store = AsyncPostgresStore(pool)
        engine = create_async_engine(
            url.replace("postgresql://", "postgresql+psycopg://", 1),
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            pool_timeout=LEND_WAIT_S,
        )
        # a batch of events is one multi-row INSERT, not one statement a row (as on psycopg2)
        engine.dialect.use_insertmanyvalues_wo_returning = True
        # a connection the database dropped is replaced, not used; checked without a round trip
        event.listen(engine.sync_engine, "checkout", replace_if_disturbed)
        stack.push_async_callback(engine.dispose)
        direct = Direct(engine)
        runs = PostgresRunStore(engine, direct)
        async with _setting_up_postgres(url):  # API processes and workers start together
            await saver.setup()
            await store.setup()
            await runs.setup()
        knowledge = KnowledgeBase(settings.knowledge_path.resolve(), settings)
        ledger, journal = StoreStepLedger(store), StoreJournal(store)
        rates = SharedRates(engine)
        plans = StorePlanCache(store)
        yield Backend(saver, store, ledger, journal, runs, knowledge, engine, direct, rates, plans)


def _langgraph_pool(url: str, size: int) -> Any:
    """The connections LangGraph's PostgreSQL checkpointer and store share: a pool that checks a
    connection before lending it and replaces the ones the database dropped (a restart, a
    terminated backend), so nothing holds a dead connection for the process's lifetime."""
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max(2, size),
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=check_if_disturbed,  # a query only for a connection that may be dead
        timeout=LEND_WAIT_S,  # a request in an outage is refused (503) soon, not after 30 s
        reconnect_timeout=RECONNECT_S,
        open=False,  # opened by ``async with`` (on the running loop)
    )


SETUP_LOCK = 7_421_336  # PostgreSQL advisory lock: one process sets a database up at a time


@asynccontextmanager
async def _setting_up_postgres(url: str) -> AsyncIterator[None]:
    """Hold the set-up lock of the database at ``url`` (other processes wait for it). Waiting
    polls ``pg_try_advisory_lock``: a session blocked in ``pg_advisory_lock`` is an open
    transaction, which the holder's ``CREATE INDEX CONCURRENTLY`` would wait for (a deadlock)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while True:
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK,))
            taken = await cursor.fetchone()
            if taken is not None and taken[0]:
                break
            await asyncio.sleep(0.1)
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
