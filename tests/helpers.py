"""Shared helpers for tests that run teams with scripted models: teams and plans built one way,
runs collected, and waits on conditions (never on the wall clock)."""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from teamgraph import Plan, Step, prompts
from teamgraph.brief import current_brief
from teamgraph.config import Settings
from teamgraph.events import BaseEvent
from teamgraph.result import RunResult
from teamgraph.runtime.team_api import Team

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "teams"
FAST_RETRY = {"max_attempts": 3, "initial_delay_s": 0, "max_delay_s": 0, "jitter_s": 0}
# How long a test waits for a condition before it fails: only there so that a broken test fails
# instead of hanging, never a measure of speed (a loaded machine may take many times longer).
CEILING_S = 60.0
# The same for a step that starts a process (a CLI run, a server, a worker): on a machine with
# both cores busy, importing teamgraph's dependencies alone took 26 s.
PROCESS_CEILING_S = 300.0

# --- teams and plans ---------------------------------------------------------------------------

# Keyword arguments of ``make_team`` that are the team's run options, not fields of its spec.
RUN_OPTIONS = frozenset({"model", "models", "tools", "registry", "user_id"})


def member(name: str, description: str | None = None, **fields: Any) -> dict[str, Any]:
    """A member of a team spec: ``description`` defaults to ``the <name>``; ``fields`` are the
    member's other fields (``tools``, ``kind``, ``output_schema``...)."""
    return {"name": name, "description": description or f"the {name}", **fields}


def make_team(settings: Settings | None, *members: str | dict[str, Any], **fields: Any) -> Team:
    """A team of ``members`` (built-in role names or :func:`member` dicts) run with
    ``settings``. ``fields`` are spec fields (``name`` defaults to ``t``; ``retry`` to
    :data:`FAST_RETRY`, so that no test waits out a production backoff) or run options
    (``model``, ``models``, ``tools``, ``user_id``)."""
    options = {key: fields.pop(key) for key in RUN_OPTIONS & fields.keys()}
    spec = {"name": "t", "retry": FAST_RETRY, **fields, "members": list(members)}
    return Team.from_dict(spec, settings=settings, **options)


def desk_team(settings: Settings) -> Team:
    """The desk: a researcher and a writer, who ask what is meant when a request is vague."""
    return make_team(settings, "researcher", "writer", name="desk", clarify=True)


def workflow_team(settings: Settings, model: BaseChatModel | None = None, **workflow: Any) -> Team:
    """A workflow team of researcher, analyst and writer, every role played by ``model`` (the
    offline model when none is given); ``workflow``: the spec's ``workflow`` fields."""
    return make_team(settings, "researcher", "analyst", "writer", workflow=workflow, model=model)


def make_plan(*steps: tuple[str, str, list[str]], name: str = "p") -> Plan:
    """A plan of ``(id, worker, depends_on)`` steps; each step's task is ``task <id>``."""
    return Plan(name=name, steps=[_step(*step) for step in steps])


def _step(step_id: str, worker: str, depends_on: list[str]) -> Step:
    return Step(id=step_id, worker=worker, task=f"task {step_id}", depends_on=depends_on)


def is_planner(messages: list[BaseMessage]) -> bool:
    """Inside a model call: whether the workflow planner is asking (by the call's brief)."""
    brief = current_brief()
    return brief is not None and brief.role == "planner"


def task_of(messages: list[BaseMessage]) -> str:
    human = [m for m in messages if isinstance(m, HumanMessage)][-1]
    return str(human.content).split(prompts.CONTEXT_HEADING)[0].strip()


def plan_json(*steps: tuple[str, str, list[str]], confidence: float = 0.9) -> str:
    """What a scripted planner answers: the :func:`make_plan` of ``steps``, as JSON."""
    return json.dumps(
        {
            "name": "scripted plan",
            "reasoning": "scripted",
            "confidence": confidence,
            "entities": [],
            "steps": [_step(*step).model_dump() for step in steps],
        }
    )


async def run_collect(
    team: Team, request: str, delivered: Delivered | None = None, **options: Any
) -> tuple[RunResult, list[BaseEvent]]:
    """Run ``team`` to its end: its result and every event it streamed (also added to
    ``delivered`` as they come, for scripted models that wait on them)."""
    delivered = delivered or Delivered()
    async with team.runner() as runner:
        run_id = options.pop("run_id", "run-1")
        async for event in runner.stream(request, run_id=run_id, **options):
            delivered.add(event)
        return await runner.result(run_id), delivered.events


def by_type(events: list[BaseEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]  # type: ignore[attr-defined]


# --- waiting on conditions ---------------------------------------------------------------------


class Delivered:
    """The events a run's stream has delivered so far. A scripted model waits with
    :meth:`wait_for` until the run has said something (a step started, completed or failed):
    steps are ordered by the run's own events, never by sleeps racing each other."""

    def __init__(self) -> None:
        self.events: list[BaseEvent] = []
        self._arrival = asyncio.Event()

    def add(self, event: BaseEvent) -> None:
        self.events.append(event)
        self._arrival.set()
        self._arrival = asyncio.Event()

    def has(self, kind: str, step_id: str | None = None) -> bool:
        return any(
            e.type == kind and step_id in (None, getattr(e, "step_id", None))  # type: ignore[attr-defined]
            for e in self.events
        )

    async def wait_for(self, kind: str, step_id: str | None = None) -> None:
        """Until an event ``kind`` (of step ``step_id``) was delivered; fails after
        :data:`CEILING_S`."""
        async with asyncio.timeout(CEILING_S):
            while not self.has(kind, step_id):
                await self._arrival.wait()


async def eventually(check: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Poll ``check`` until it holds; fails naming ``what`` after :data:`CEILING_S`."""
    deadline = asyncio.get_running_loop().time() + CEILING_S
    while True:
        outcome = check()
        if await outcome if inspect.isawaitable(outcome) else outcome:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {CEILING_S:.0f} s: {what}")
        await asyncio.sleep(0.01)


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
        await eventually(lambda: ticks >= 40, "the event loop ticks while the write waits")
        assert not waiting.done()  # waiting in a thread for the lock, the loop runs on
        blocker.execute("COMMIT")
        await asyncio.wait_for(waiting, CEILING_S)
    finally:
        ticking.cancel()
        blocker.close()
