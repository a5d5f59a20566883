"""The SQLite checkpointer's loop path writes what aiosqlite would, and never blocks the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from teamgraph.runtime.checkpointer import LoopSqliteSaver

CONFIG: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


@pytest.fixture
async def saver(tmp_path: Path) -> AsyncIterator[LoopSqliteSaver]:
    async with LoopSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        assert isinstance(saver, LoopSqliteSaver)
        await saver.setup()
        saver.open_fast_path(tmp_path / "c.db")
        yield saver
        saver.close_fast_path()


async def _read_back(path: Path) -> Any:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        return await plain.aget_tuple(CONFIG)


async def test_a_checkpoint_and_its_writes_read_back_through_aiosqlite(
    saver: LoopSqliteSaver, tmp_path: Path
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
    saver: LoopSqliteSaver, tmp_path: Path
) -> None:
    blocker = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    checkpoint = empty_checkpoint()
    saving = asyncio.create_task(saver.aput(CONFIG, checkpoint, {"step": 0}, {}))
    await asyncio.sleep(0.2)
    assert not saving.done() and ticks >= 10  # waiting in aiosqlite's thread
    blocker.execute("COMMIT")
    await asyncio.wait_for(saving, 5)
    ticking.cancel()
    assert (await _read_back(tmp_path / "c.db")).checkpoint["id"] == checkpoint["id"]
    blocker.close()
