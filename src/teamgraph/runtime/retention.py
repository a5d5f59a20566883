"""What a run keeps once it has ended, and for how long.

**Compaction** (:func:`compact`, when a run ends). A completed run keeps what its readers need —
its row (answer, status, usage and cost), its events (replay), its step ledger and the latest
checkpoint of its thread and of its nested teams' threads (its result, ``teamgraph diff``, and
a session's next run, which continues the thread) — and drops what only a resume reads: older
checkpoints with their pending writes, and its journal. A cancelled run may still be resumed
(``teamgraph.status.STOPPED``): it drops only the older checkpoints and their writes (a resume
starts from the latest one) and keeps its journal, whose replies are replayed and counted. Paused,
failed and over-budget runs keep everything.

**Retention** (:func:`prune`: ``teamgraph prune`` and the server's ``retention_days``). Runs that
ended and have not changed for a while are removed whole, a batch at a time: their step ledger
and journal, their threads' checkpoints (a session's thread only once no other run of the session
is left), then — in one transaction, last, so that a prune cut short finds them again — their
events, messages, turn results and rows. SQLite files then give the freed pages back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta

from teamgraph.config import Settings
from teamgraph.errors import UsageError
from teamgraph.runtime.backend import Backend
from teamgraph.runtime.event_log import OUTAGE_S
from teamgraph.status import EXECUTING, FINISHED, PAUSED, STOPPED, RunStatus
from teamgraph.storage.checkpoints import prune_threads
from teamgraph.storage.models import utcnow
from teamgraph.storage.outages import until_reachable

COMPACTED: frozenset[RunStatus] = FINISHED | {"cancelled"}
"""Statuses whose runs are compacted when they end."""
PRUNED: frozenset[RunStatus] = FINISHED | STOPPED
"""Statuses that retention removes by default (a paused run only when named)."""
BATCH = 100  # runs removed per batch
log = logging.getLogger(__name__)


async def compact(
    backend: Backend, settings: Settings, run_id: str, thread_id: str, status: str
) -> None:
    """Drop what nobody reads once the run ended with ``status`` (nothing for other statuses,
    nor with ``compact_runs`` off) — through a database outage, as the run's last events are
    stored (for up to ``OUTAGE_S``). A failure is logged, never raised: the run has ended."""
    if status not in COMPACTED or not settings.compact_runs:
        return

    async def compacted() -> None:  # both steps may be repeated
        await prune_threads(backend.checkpointer, [thread_id], keep_latest=True)
        if status in FINISHED:
            await backend.journal.forget([run_id])

    try:
        await until_reachable(compacted, OUTAGE_S, what=f"compacting run {run_id}")
    except Exception:
        log.warning("run %s: compaction failed (its records stay whole)", run_id, exc_info=True)


@dataclass
class Pruned:
    """What a prune removed (or, dry, would remove)."""

    runs: int = 0
    run_ids: list[str] = field(default_factory=list)  # the first few, to show
    pages: int = 0  # SQLite pages given back to the file system


SHOWN = 20


async def prune(
    backend: Backend,
    older_than: timedelta,
    statuses: Collection[RunStatus] = PRUNED,
    *,
    dry_run: bool = False,
    batch: int = BATCH,
    pause_s: float = 0.0,
) -> Pruned:
    """Remove runs in one of ``statuses`` unchanged for ``older_than``, whole, ``batch`` runs
    at a time with ``pause_s`` between batches (live runs' writes go between them).
    ``dry_run``: only count them."""
    _check(older_than, statuses)
    before, pruned, offset = utcnow() - older_than, Pruned(), 0
    while True:
        found = await backend.runs.expired(before, statuses, batch, offset=offset)
        if not found:
            break
        pruned.runs += len(found)
        pruned.run_ids += [run for run, _ in found][: SHOWN - len(pruned.run_ids)]
        if dry_run:
            offset += len(found)
        else:
            await _remove(backend, found)
        if len(found) < batch:
            break
        await asyncio.sleep(pause_s)
    if not dry_run and pruned.runs:
        pruned.pages = await backend.runs.reclaim()
    return pruned


def _check(older_than: timedelta, statuses: Collection[RunStatus]) -> None:
    live = sorted(set(statuses) & EXECUTING)
    if live:
        raise UsageError(f"status {', '.join(live)}: runs that execute are never pruned")
    unknown = sorted(set(statuses) - PRUNED - PAUSED)
    if unknown:
        raise UsageError(f"unknown status {', '.join(unknown)}")
    if older_than <= timedelta(0):
        raise UsageError(f"older than {older_than}: give a positive age (e.g. 30d)")


async def _remove(backend: Backend, found: list[tuple[str, str]]) -> None:
    """One batch, records first and rows last (a batch cut short is found again)."""
    ids = [run for run, _ in found]
    in_use = await backend.runs.threads_in_use({thread for _, thread in found}, ids)
    # a thread no other run works on goes whole; in a session's thread that goes on, only the
    # run's nested teams' threads ({thread}/{run}/…)
    threads = {thread if thread not in in_use else f"{thread}/{run}" for run, thread in found}
    await backend.ledger.forget(ids)
    await backend.journal.forget(ids)
    await prune_threads(backend.checkpointer, sorted(threads), keep_latest=False)
    await backend.runs.delete(ids)


@asynccontextmanager
async def pruning(backend: Backend, settings: Settings) -> AsyncIterator[None]:
    """While inside: every ``retention_interval_s``, :func:`prune` runs unchanged for
    ``retention_days`` (nothing when it is unset). A failed pass is logged and tried again
    at the next interval. Several processes may prune one database: removing is idempotent."""
    if settings.retention_days is None:
        yield
        return
    age = timedelta(days=settings.retention_days)

    async def keep_pruning() -> None:
        while True:
            try:
                pruned = await prune(backend, age, pause_s=PAUSE_S)
                if pruned.runs:
                    log.info("retention: removed %d run(s)", pruned.runs)
            except Exception:
                log.warning("retention: prune failed, tried again later", exc_info=True)
            await asyncio.sleep(settings.retention_interval_s)

    task = asyncio.create_task(keep_pruning(), name="teamgraph-retention")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


PAUSE_S = 0.05  # between batches of the server's periodic prune


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m`` or ``45s`` as a duration (:class:`UsageError` otherwise)."""
    units = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if unit not in units or not number.isdigit() or int(number) <= 0:
        raise UsageError(f"age {text!r}: write a positive number and a unit, e.g. 30d, 12h, 90m")
    return timedelta(**{units[unit]: int(number)})
