"""Rates shared by every process on one PostgreSQL database — a provider's requests and tokens
per minute hold across all API and worker processes, not once per process.

Each rate is one row (``rate_limits``) and the generic cell rate algorithm (GCRA): ``tat`` is
the theoretical arrival time of the next unit. Reserving ``cost`` seconds of the rate is one
statement, atomic under concurrency (the row's lock is held for that statement only): it moves
``tat`` forward and says how long the caller waits for its turn. Nothing is polled and nothing
is locked across a wait.

(pyrate-limiter's ``PostgresBucket`` was measured against this need and not used: it is
synchronous — a blocking round trip on the event loop per call — and serialises every caller
under an exclusive lock on the whole table, refusing the losers.)
"""

from __future__ import annotations

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine

from teamgraph.storage.outages import stops_on_outage

_RESERVE = text(
    """
    INSERT INTO rate_limits AS r (key, tat)
    VALUES (:key, extract(epoch FROM statement_timestamp()) + :cost)
    ON CONFLICT (key) DO UPDATE
    SET tat = greatest(r.tat, extract(epoch FROM statement_timestamp())) + :cost
    RETURNING r.tat - :cost - :tolerance - extract(epoch FROM statement_timestamp()) AS wait
    """
).bindparams(bindparam("key"), bindparam("cost"), bindparam("tolerance"))


class SharedRates:
    """The rates of one database (``rate_limits``), for every process that opens it."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @stops_on_outage
    async def reserve(self, key: str, cost_s: float, tolerance_s: float) -> float:
        """Take ``cost_s`` seconds of the rate ``key``; the seconds to wait before using them
        (0 or less: at once). ``tolerance_s``: how far ahead of its schedule the rate may run
        (its burst)."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                _RESERVE, {"key": key, "cost": cost_s, "tolerance": tolerance_s}
            )
            return float(result.scalar_one())
