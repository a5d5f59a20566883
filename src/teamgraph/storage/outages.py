"""Which errors mean "the database cannot be reached right now" — as opposed to a query that is
wrong or data the database refuses.

An outage (a restart, a terminated connection, a refused or timed-out connection, a full pool, a
SQLite file locked past its busy timeout or a full disk) stops what was being written without
deciding anything: a run that meets one stops where it is, resumable, and is resumed once the
database answers again; a request that meets one gets 503 with ``Retry-After``. Anything else
is an error of its own kind."""

from __future__ import annotations

import asyncio
import functools
import logging
import select
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from teamgraph.errors import DatabaseUnavailable

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger(__name__)

RETRY_AFTER_S = 2  # what a request that met an outage is told to wait (503 Retry-After)
# the longest wait between two attempts to reach the database again: an attempt costs the
# database one connection attempt, and work resumes at most this long after it is back
BACKOFF_MAX_S = 0.5

# PostgreSQL SQLSTATEs of a connection that failed or a server that is going away
_GONE = ("57P01", "57P02", "57P03", "53300")  # admin/crash shutdown, starting up, too many
_SQLITE = ("database is locked", "database table is locked", "disk is full", "disk i/o error")


PURGE_EVERY_S = 0.5  # an outage met again within this restarts no purge
_purges: dict[int, Callable[[], Coroutine[Any, Any, None]]] = {}  # id → what drops dead connections
_purging: set[asyncio.Task[None]] = set()
_last_purge = 0.0


@contextmanager
def purged_on_outage(purge: Callable[[], Coroutine[Any, Any, None]]) -> Iterator[None]:
    """While inside: ``purge`` runs whenever this process meets an outage (at most once per
    :data:`PURGE_EVERY_S`). For a connection pool's ``check()``: after a restart or
    ``pg_terminate_backend`` every pooled connection is dead, and a pool that found them one
    at a time, backing off 1, 2, 4 s between finds, would hold work for seconds after the
    database is back; its ``check()`` drops them all at once and opens new ones."""
    _purges[id(purge)] = purge
    try:
        yield
    finally:
        _purges.pop(id(purge), None)


def outage_met() -> None:
    """Where an outage is met (a retry loop, a run stopping): start the registered purges."""
    global _last_purge
    now = time.monotonic()
    if not _purges or now - _last_purge < PURGE_EVERY_S:
        return
    _last_purge = now
    for purge in list(_purges.values()):
        task = asyncio.get_running_loop().create_task(purge())
        _purging.add(task)
        task.add_done_callback(_purged)


def _purged(task: asyncio.Task[None]) -> None:
    _purging.discard(task)
    if not task.cancelled() and task.exception() is not None:  # the database is still away
        log.debug("purging dead connections failed: %s", task.exception())


def stopped(error: BaseException) -> DatabaseUnavailable:
    """What a run that met the outage ``error`` stops with (raise it ``from error``)."""
    return DatabaseUnavailable(
        f"the database could not be reached ({type(error).__name__}: {error}); the run stopped "
        "where it was and resumes from its last checkpoint once the database is back"
    )


@contextmanager
def stopping_on_outage() -> Iterator[None]:
    """Turn an outage met inside the block into :class:`DatabaseUnavailable`, which stops the
    whole run (resumable) rather than failing the step that happened to be writing."""
    try:
        yield
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        if is_outage(exc):
            outage_met()
            raise stopped(exc) from exc
        raise


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` (or the driver error it wraps) says the database is unreachable or
    unusable for now, so the same work may succeed once it is back. Only database drivers'
    errors count: a model provider's refused connection is not the database's."""
    return any(_outage(cause) for cause in _causes(error))


def _outage(error: BaseException) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        return any(text in str(error).lower() for text in _SQLITE)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(error, psycopg.Error):
        state = error.sqlstate
        if state is None:  # raised by the client: the connection broke, timed out, was closed
            return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)
        return bool(state.startswith("08") or state in _GONE)
    pool = sys.modules.get("psycopg_pool")
    if pool is not None and isinstance(error, pool.PoolTimeout | pool.PoolClosed):
        return True
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy is not None:
        if isinstance(error, sqlalchemy.TimeoutError):  # no connection free in the pool
            return True
        if isinstance(error, sqlalchemy.DBAPIError) and error.connection_invalidated:
            return True
    return False


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps: SQLAlchemy's ``orig``, an explicit ``raise … from``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__


def stops_on_outage(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """``method`` (a coroutine function) with :func:`stopping_on_outage` around it."""

    @functools.wraps(method)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
        with stopping_on_outage():
            return await method(*args, **kwargs)

    return guarded


async def until_reachable(
    operation: Callable[[], Awaitable[T]], within_s: float | None = None, what: str = "it"
) -> T:
    """``await operation()``, again and again while it fails with an outage — waiting 0.05 s,
    then twice as long each time up to :data:`BACKOFF_MAX_S` — for at most ``within_s`` seconds
    (``None``: until the database answers). Any other error, or an outage past ``within_s``,
    is raised. ``operation`` must be safe to repeat (a read, or a write that checks its own
    preconditions)."""
    loop = asyncio.get_running_loop()
    deadline = None if within_s is None else loop.time() + within_s
    wait, failures = 0.05, 0
    while True:
        try:
            result = await operation()
        except Exception as exc:
            if not is_outage(exc) or (deadline is not None and loop.time() + wait > deadline):
                raise
            failures += 1
            outage_met()
            if failures == 1:
                log.warning("the database is unreachable (%s); retrying %s", exc, what)
            await asyncio.sleep(wait)
            wait = min(BACKOFF_MAX_S, wait * 2)
        else:
            if failures:
                log.info("the database answers again: %s went through", what)
            return result


# --- liveness ----------------------------------------------------------------------------------
# Whether a pooled PostgreSQL connection is still alive — found without a round trip.
#
# A pool that checks each connection it lends with a query (psycopg_pool's ``check_connection``,
# SQLAlchemy's ``pool_pre_ping``) pays a round trip per lend, several per run step (BENCHMARKS.md
# counts them). Both pools check with :func:`disturbed` instead.
#
# An idle connection has nothing to read: the server writes to it only when it ends it
# (``pg_terminate_backend``, a shutdown or restart: an error, then end of file) or when a proxy or
# the network closes it (end of file). So a connection whose socket is readable while it sits in
# the pool, or that is closed or broken already, is checked with a query and replaced if it fails
# (psycopg_pool) or replaced (SQLAlchemy); any other is lent as it is. What this cannot see — the
# goodbye still on its way (:mod:`teamgraph.storage.direct` tries such a statement once more), a
# peer that vanished without a word — a query meets on use, as an outage (see
# :mod:`teamgraph.storage.outages`): retried on a fresh connection, the pool purged.
def disturbed(conn: Any) -> bool:
    """Whether a psycopg connection idle in a pool may be dead: closed, in a bad state, or its
    socket readable (the server or the network said something while nothing was asked)."""
    from psycopg.pq import ConnStatus

    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        return True
    try:
        poll = select.poll()  # not select.select: any descriptor number
        poll.register(conn.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poll.poll(0))
    except (OSError, ValueError):  # no socket any more
        return True


async def check_if_disturbed(conn: Any) -> None:
    """psycopg_pool's ``check``: a query only for a connection that may be dead."""
    from psycopg_pool import AsyncConnectionPool

    if disturbed(conn):
        await AsyncConnectionPool.check_connection(conn)  # raises: the pool replaces it


def replace_if_disturbed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """SQLAlchemy's pool ``checkout`` event: a connection that may be dead is replaced (the pool
    discards it and checks out another on ``DisconnectionError``)."""
    from sqlalchemy.exc import DisconnectionError

    if disturbed(dbapi_connection.driver_connection):
        raise DisconnectionError("the connection may have been ended by the database")
