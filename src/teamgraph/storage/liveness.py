"""Whether a pooled PostgreSQL connection is still alive — found without a round trip.

A pool that checks each connection it lends with a query (psycopg_pool's ``check_connection``,
SQLAlchemy's ``pool_pre_ping``) pays a round trip per lend, several per run step (BENCHMARKS.md
counts them). Both pools check with :func:`disturbed` instead.

An idle connection has nothing to read: the server writes to it only when it ends it
(``pg_terminate_backend``, a shutdown or restart: an error, then end of file) or when a proxy or
the network closes it (end of file). So a connection whose socket is readable while it sits in
the pool, or that is closed or broken already, is checked with a query and replaced if it fails
(psycopg_pool) or replaced (SQLAlchemy); any other is lent as it is. What this cannot see — the
goodbye still on its way (:mod:`teamgraph.storage.direct` tries such a statement once more), a
peer that vanished without a word — a query meets on use, as an outage (see
:mod:`teamgraph.storage.outages`): retried on a fresh connection, the pool purged.
"""

from __future__ import annotations

import select
from typing import Any


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
