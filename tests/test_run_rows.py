"""Run rows are written on the event loop, and through a worker thread when SQLite is locked."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from teamgraph import Settings
from teamgraph.errors import RunNotFound
from teamgraph.runtime.backend import open_backend


async def test_run_rows_are_written_and_a_lock_never_blocks_the_loop(tmp_path: Path) -> None:
    async with open_backend(Settings(database_url=f"sqlite:///{tmp_path}/r.db")) as backend:
        runs = backend.runs
        assert runs.direct._fast is not None  # SQLite: the event loop's own connection
        fields = {"thread_id": "t", "team_name": "x", "team_spec": {"a": [1]}, "pattern": "single"}
        await runs.create(id="one", input="hi", status="running", **fields)
        await runs.update("one", status="completed", usage_by_agent={"w": {"input_tokens": 3}})
        row = await runs.get("one")
        assert (row.status, row.team_spec, row.usage_by_agent) == (
            "completed",
            {"a": [1]},
            {"w": {"input_tokens": 3}},
        )
        with pytest.raises(RunNotFound):
            await runs.update("missing", status="failed")

        blocker = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        creating = asyncio.create_task(runs.create(id="two", input="x", status="running", **fields))
        await asyncio.sleep(0.2)
        assert not creating.done() and ticks >= 10  # waiting in a worker thread
        blocker.execute("COMMIT")
        await asyncio.wait_for(creating, 10)
        ticking.cancel()
        blocker.close()
        assert (await runs.get("two")).input == "x"
