"""Shared helpers for tests that run teams with scripted models."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from teamgraph import prompts
from teamgraph.brief import current_brief
from teamgraph.config import Settings
from teamgraph.events import BaseEvent
from teamgraph.result import RunResult
from teamgraph.runtime.team import Team

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "teams"
FAST_RETRY = {"max_attempts": 3, "initial_delay_s": 0, "max_delay_s": 0, "jitter_s": 0}


def team_dict(**workflow: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "members": ["researcher", "analyst", "writer"],
        "retry": FAST_RETRY,
        "workflow": workflow,
    }


def is_planner(messages: list[BaseMessage]) -> bool:
    """Inside a model call: whether the workflow planner is asking (by the call's brief)."""
    brief = current_brief()
    return brief is not None and brief.role == "planner"


def task_of(messages: list[BaseMessage]) -> str:
    human = [m for m in messages if isinstance(m, HumanMessage)][-1]
    return str(human.content).split(prompts.CONTEXT_HEADING)[0].strip()


def plan_json(*steps: tuple[str, str, list[str]], confidence: float = 0.9) -> str:
    return json.dumps(
        {
            "name": "scripted plan",
            "reasoning": "scripted",
            "confidence": confidence,
            "entities": [],
            "steps": [
                {"id": i, "worker": w, "task": f"task {i}", "depends_on": d} for i, w, d in steps
            ],
        }
    )


Handler = Callable[[list[BaseMessage]], Awaitable[Any] | Any]


async def run_collect(
    team: Team, request: str, **options: Any
) -> tuple[RunResult, list[BaseEvent]]:
    events: list[BaseEvent] = []
    async with team.runner() as runner:
        run_id = options.pop("run_id", "run-1")
        async for event in runner.stream(request, run_id=run_id, **options):
            events.append(event)
        return await runner.result(run_id), events


def by_type(events: list[BaseEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]  # type: ignore[attr-defined]


async def sleep_then(seconds: float, value: Any) -> Any:
    await asyncio.sleep(seconds)
    return value


def settings_for(path: str) -> Settings:
    return Settings(database_url=f"sqlite:///{path}")


async def waits_for_the_lock_without_blocking(path: Path, write: Awaitable[Any]) -> None:
    """While another connection holds SQLite's write lock on ``path``, ``write`` waits and the
    event loop keeps running (it ticks); once the lock is released, ``write`` completes."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    waiting = asyncio.ensure_future(write)
    try:
        await asyncio.sleep(0.2)
        assert not waiting.done() and ticks >= 10  # waiting in a thread, the loop runs on
        blocker.execute("COMMIT")
        await asyncio.wait_for(waiting, 10)
    finally:
        ticking.cancel()
        blocker.close()
