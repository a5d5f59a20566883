"""Schema upgrades are all or nothing: a process stopped half-way through its first start-up
leaves a database the next start-up can set up (no "table already exists")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from teamgraph.storage import run_store as migrate


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    await engine.dispose()
    return names


async def test_an_upgrade_stopped_half_way_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/half.db"
    real = migrate.command.upgrade

    def upgrade_then_die(config: Any, revision: str) -> None:
        real(config, revision)  # every table created ...
        raise KeyboardInterrupt  # ... and the process stopped before the end

    monkeypatch.setattr(migrate.command, "upgrade", upgrade_then_die)
    engine = create_async_engine(url)
    with pytest.raises(KeyboardInterrupt):
        await migrate.upgrade(engine)
    await engine.dispose()
    assert await _tables(url) == set()

    monkeypatch.setattr(migrate.command, "upgrade", real)
    engine = create_async_engine(url)
    await migrate.upgrade(engine)  # the next start-up sets it up
    await engine.dispose()
    assert {"runs", "events", "alembic_version"} <= await _tables(url)
