"""The SQLite checkpointer writes what LangGraph's own savers read, and never blocks the loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from teamgraph.storage.checkpoints import SqliteCheckpointer

from .helpers import waits_for_the_lock_without_blocking

CONFIG: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


@pytest.fixture
async def saver(tmp_path: Path) -> AsyncIterator[SqliteCheckpointer]:
    saver = SqliteCheckpointer(tmp_path / "c.db")
    yield saver
    saver.close()


async def _read_back(path: Path) -> Any:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        return await plain.aget_tuple(CONFIG)


async def test_a_checkpoint_and_its_writes_read_back_through_aiosqlite(
    saver: SqliteCheckpointer, tmp_path: Path
) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"request": "hello", "steps": {"a": {"output": "x"}}}
    saved = await saver.aput(CONFIG, checkpoint, {"source": "input", "step": -1}, {})
    await saver.aput_writes(saved, [("steps", {"b": 1})], task_id="task-1")
    stored = await _read_back(tmp_path / "c.db")
    assert stored.checkpoint["id"] == checkpoint["id"]
    assert stored.checkpoint["channel_values"] == checkpoint["channel_values"]
    assert stored.metadata["step"] == -1
    assert stored.pending_writes == [("task-1", "steps", {"b": 1})]
    assert (await saver.aget_tuple(CONFIG)) == stored


async def test_a_locked_database_never_blocks_the_event_loop(
    saver: SqliteCheckpointer, tmp_path: Path
) -> None:
    checkpoint = empty_checkpoint()
    saving = saver.aput(CONFIG, checkpoint, {"step": 0}, {})
    await waits_for_the_lock_without_blocking(tmp_path / "c.db", saving)
    assert (await _read_back(tmp_path / "c.db")).checkpoint["id"] == checkpoint["id"]
