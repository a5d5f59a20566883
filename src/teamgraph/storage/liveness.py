"""Whether a pooled PostgreSQL connection is still alive — found without a round trip.

A pool that checks each connection it lends with a query (SQLAlchemy's ``pool_pre_ping``)
pays a round trip and a transaction per lend. An idle connection has nothing to read: the
server writes to it only when it ends it (``pg_terminate_backend``, a shutdown or restart: an
error, then end of file), and a proxy or the network that closes it leaves an end of file. So
a connection whose socket is readable while it sits in the pool, or that is closed or broken
already, is replaced; any other is lent as it is. What this cannot see — a peer that vanished
without a word — a query meets on use, as an outage (see :mod:`teamgraph.storage.outages`).

LangGraph's pool still checks every connection it lends with a query: its callers (the step
ledger's write, then the step's event) are not safe against an answer lost after a commit, and
a check that meets a cut connection first keeps that window small (BENCHMARKS.md, issue 34).
"""

from __future__ import annotations

import select
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine


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


def check_checkouts(engine: AsyncEngine) -> None:
    """SQLAlchemy's pool replaces a lent connection that may be dead (instead of
    ``pool_pre_ping``'s query per checkout): it is invalidated and a fresh one is made."""

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if disturbed(dbapi_connection.driver_connection):
            raise DisconnectionError("the connection was closed while idle in the pool")
