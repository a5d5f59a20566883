"""Where the plan cache (:mod:`teamgraph.planning.plan_cache`) keeps its entries: a table of the
SQLite file, or a LangGraph ``BaseStore`` (PostgreSQL's).

An entry is one validated plan a team's planner model made for one owner's request, kept as a
skeleton (the request's words replaced by slots), with the request's vector. Entries are found
by their *key* — a digest of everything the plan depends on (the team's spec, its templates,
the planner and embedding models) — and their owner only: a lookup never reads another
owner's entries, and an entry of a spec that changed is never read again (and is deleted by the
next write for that team).

In SQLite: table ``tg_plan_cache``, on the file's :class:`~teamgraph.storage.sqlite.LoopFirst`
lanes (those of the step ledger and the journal). In a store: namespace
``("teamgraph", "plan_cache", team, key, owner)``, team and owner as digests (a store's
namespace labels may not hold every character a name or a user id may).
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Protocol

from langgraph.store.base import BaseStore

from teamgraph.storage.sqlite import LoopFirst

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tg_plan_cache (id TEXT PRIMARY KEY, team TEXT NOT NULL, "
    "key TEXT NOT NULL, owner TEXT NOT NULL, request TEXT NOT NULL, vector BLOB NOT NULL, "
    "skeleton TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS tg_plan_cache_owner ON tg_plan_cache (key, owner, created_at)",
    "CREATE INDEX IF NOT EXISTS tg_plan_cache_team ON tg_plan_cache (team, key)",
)
_NAMESPACE = ("teamgraph", "plan_cache")


@dataclass(frozen=True)
class CacheEntry:
    """One cached plan. ``vector``: the request's unit vector (float32 bytes); ``skeleton``:
    the plan with slots (JSON, :func:`teamgraph.planning.plan_cache.skeleton`)."""

    id: str
    team: str
    key: str
    owner: str
    request: str
    vector: bytes
    skeleton: str
    created_at: float


class PlanCacheStore(Protocol):
    """Entries by (key, owner); writes keep at most ``keep`` per (key, owner), newest first,
    and drop the team's entries under any other key."""

    async def entries(self, key: str, owner: str) -> list[CacheEntry]: ...

    async def add(self, entry: CacheEntry, keep: int) -> None: ...


class SqlitePlanCache:
    """A :class:`PlanCacheStore` in table ``tg_plan_cache``. Opening creates the table (it may
    wait for the lock: call it off the event loop)."""

    def __init__(self, lanes: LoopFirst[sqlite3.Connection]) -> None:
        self.lanes = lanes
        self.lanes.waiting(lambda conn: [conn.execute(statement) for statement in _SCHEMA])

    async def entries(self, key: str, owner: str) -> list[CacheEntry]:
        query = (
            "SELECT id, team, key, owner, request, vector, skeleton, created_at "
            "FROM tg_plan_cache WHERE key = ? AND owner = ? ORDER BY created_at DESC"
        )
        rows = await self.lanes.run(lambda conn: conn.execute(query, (key, owner)).fetchall())
        return [CacheEntry(*row) for row in rows]

    async def add(self, entry: CacheEntry, keep: int) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "DELETE FROM tg_plan_cache WHERE team = ? AND key <> ?", (entry.team, entry.key)
                )
                conn.execute(
                    "INSERT OR REPLACE INTO tg_plan_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        entry.id,
                        entry.team,
                        entry.key,
                        entry.owner,
                        entry.request,
                        entry.vector,
                        entry.skeleton,
                        entry.created_at,
                    ),
                )
                conn.execute(
                    "DELETE FROM tg_plan_cache WHERE key = ? AND owner = ? AND id NOT IN "
                    "(SELECT id FROM tg_plan_cache WHERE key = ? AND owner = ? "
                    "ORDER BY created_at DESC LIMIT ?)",
                    (entry.key, entry.owner, entry.key, entry.owner, keep),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        await self.lanes.run(write)


class StorePlanCache:
    """A :class:`PlanCacheStore` in a LangGraph store, namespace
    ``("teamgraph", "plan_cache", team, key, owner)``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    async def entries(self, key: str, owner: str) -> list[CacheEntry]:
        found = await self.store.alist_namespaces(
            prefix=_NAMESPACE, suffix=(key, _label(owner)), limit=100_000
        )
        entries: list[CacheEntry] = []
        for namespace in found:
            for item in await self.store.asearch(namespace, limit=100_000):
                entries.append(_from_value(item.value))
        return sorted(entries, key=lambda e: e.created_at, reverse=True)

    async def add(self, entry: CacheEntry, keep: int) -> None:
        team_prefix = (*_NAMESPACE, _label(entry.team))
        for namespace in await self.store.alist_namespaces(prefix=team_prefix, limit=100_000):
            if namespace[len(team_prefix)] != entry.key:
                for item in await self.store.asearch(namespace, limit=100_000):
                    await self.store.adelete(namespace, item.key)
        namespace = (*team_prefix, entry.key, _label(entry.owner))
        await self.store.aput(namespace, entry.id, _to_value(entry), index=False)
        kept = await self.store.asearch(namespace, limit=100_000)
        kept.sort(key=lambda item: float(item.value["created_at"]), reverse=True)
        for item in kept[keep:]:
            await self.store.adelete(namespace, item.key)


def _label(name: str) -> str:
    """A namespace label standing for ``name``."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]


def _to_value(entry: CacheEntry) -> dict[str, object]:
    return {
        "id": entry.id,
        "team": entry.team,
        "key": entry.key,
        "owner": entry.owner,
        "request": entry.request,
        "vector": base64.b64encode(entry.vector).decode("ascii"),
        "skeleton": entry.skeleton,
        "created_at": entry.created_at,
    }


def _from_value(value: dict[str, object]) -> CacheEntry:
    return CacheEntry(
        id=str(value["id"]),
        team=str(value["team"]),
        key=str(value["key"]),
        owner=str(value["owner"]),
        request=str(value["request"]),
        vector=base64.b64decode(str(value["vector"])),
        skeleton=str(value["skeleton"]),
        created_at=float(str(value["created_at"])),
    )
