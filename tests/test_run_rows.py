"""Run rows are written on the event loop, and through a worker thread when SQLite is locked."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamgraph import Settings
from teamgraph.errors import RunNotFound
from teamgraph.runtime.backend import open_backend

from .helpers import waits_for_the_lock_without_blocking


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

        creating = runs.create(id="two", input="x", status="running", **fields)
        await waits_for_the_lock_without_blocking(tmp_path / "r.db", creating)
        assert (await runs.get("two")).input == "x"
