"""Fault injection for durability tests: run a team in a child process that crashes (``os._exit``,
no cleanup, like ``kill -9``) at a chosen durability boundary, then resume it in another.

Children are forked from a forkserver that has teamgraph imported, so a crash case costs
milliseconds of start-up, not seconds. Every model reply the children receive is logged (one line
per reply, written before the reply is used) so that a test can tell which calls were asked
again; every event is written to a JSON-lines file, flushed line by line.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sqlite3
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from teamgraph import Plan, Team, faults
from teamgraph.config import Settings
from teamgraph.durable import Journal
from teamgraph.errors import RunNotFound
from teamgraph.events import RunCompleted
from teamgraph.llm.offline import OfflineChatModel
from teamgraph.testing import current_brief
from tests.helpers import PROCESS_CEILING_S

REPO = Path(__file__).resolve().parents[1]
TEAMS = REPO / "examples" / "teams"
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"


class LoggedOffline(OfflineChatModel):
    """The offline model, logging every reply it hands back (which call, by its brief)."""

    log_path: str = ""

    def _log(self, messages: list[BaseMessage]) -> None:
        brief = current_brief()
        site = "?" if brief is None else f"{brief.role}|{brief.purpose}|{brief.task[:60]}"
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(f"{site}|{len(messages)}") + "\n")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        result = await super()._agenerate(messages, stop, run_manager, **kwargs)
        self._log(messages)
        return result

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks = [c async for c in super()._astream(messages, stop, run_manager, **kwargs)]
        self._log(messages)
        for chunk in chunks:
            yield chunk


@dataclass(frozen=True)
class Case:
    """One team, one database, one folder of logs."""

    team: str  # a YAML file
    db: str
    folder: str
    run_id: str
    request: str = REQUEST
    latency: float = 0.005  # seconds per model reply
    template: str | None = None  # a workflow's plan template
    plan: str | None = None  # a workflow's explicit plan (JSON)

    def path(self, name: str) -> Path:
        return Path(self.folder) / name

    def calls(self) -> Counter[str]:
        """Every model reply handed back, in any process, by call."""
        log = self.path("calls.log")
        lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
        return Counter(json.loads(line) for line in lines)

    def events(self, phase: str) -> list[dict[str, Any]]:
        out = self.path(f"{phase}.jsonl")
        lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
        return [json.loads(line) for line in lines if line.endswith("}")]

    def charges(self) -> int:
        counter = self.path("charges.txt")
        return len(counter.read_text().splitlines()) if counter.exists() else 0

    def passes(self) -> dict[str, int]:
        """How often an uncrashed start passed each boundary."""
        passes: dict[str, int] = json.loads(self.path("passes.json").read_text())
        return passes

    def stored(self) -> list[dict[str, Any]]:
        """The run's events as its store holds them after the last resume."""
        return self.events("stored")

    def inspection(self) -> dict[str, Any]:
        return json.loads(self.path("inspect.json").read_text())


def team_of(case: Case) -> Team:
    os.environ["TG_COUNTER_FILE"] = str(case.path("charges.txt"))
    model = LoggedOffline(log_path=str(case.path("calls.log")), latency=case.latency)
    settings = Settings(database_url=case.db)
    return Team.from_yaml(case.team, settings=settings, model=model)


async def _write(case: Case, phase: str, events: AsyncIterator[Any]) -> None:
    with case.path(f"{phase}.jsonl").open("a", encoding="utf-8") as out:
        async for event in events:
            out.write(event.model_dump_json() + "\n")
            out.flush()  # what a crash leaves is what a consumer had received


async def start(case: Case) -> None:
    passes = faults.count()  # how often the run passes each boundary
    async with team_of(case).runner() as runner:
        plan = Plan.model_validate_json(case.plan) if case.plan else None
        events = runner.stream(case.request, run_id=case.run_id, template=case.template, plan=plan)
        await _write(case, "start", events)
    case.path("passes.json").write_text(json.dumps(passes))


async def resume(case: Case, phase: str, approve: bool = False) -> None:
    async with team_of(case).runner() as runner:
        if phase == "resume":  # what the crash left, read before anything is redone
            await _inspect(case, runner)
        row = await runner.backend.runs.get(case.run_id)
        if row.status == "completed":  # it finished before the kill; its events were cut
            await _write(case, phase, _finished(runner, case.run_id))
        else:
            reply = {"default": {"action": "approve"}} if approve else {}
            await _write(case, phase, runner.resume_stream(case.run_id, **reply))
        case.path("stored.jsonl").unlink(missing_ok=True)
        await _write(case, "stored", runner.backend.runs.events(case.run_id))


async def _finished(runner: Any, run_id: str) -> AsyncIterator[Any]:
    """A finished run's result, as the last event a consumer reads (``run_completed``)."""
    result = await runner.result(run_id)
    yield RunCompleted(
        run_id=run_id, seq=0, status=result.status, output=result.output, usage=result.usage
    )


async def inspect(case: Case) -> None:
    """Write what the run's storage holds now (``exists`` false: no run row was stored)."""
    async with team_of(case).runner() as runner:
        try:
            await runner.backend.runs.get(case.run_id)
        except RunNotFound:
            case.path("inspect.json").write_text(json.dumps({"exists": False}))
            return
        await _inspect(case, runner)


async def _inspect(case: Case, runner: Any) -> None:
    entries = await Journal(runner.backend.journal).model_entries(case.run_id)
    steps = await runner.ledger.load(case.run_id)
    done = sorted(s for s, record in steps.items() if record.status == "done")
    state = {"journaled": len(entries), "recorded_steps": done}
    case.path("inspect.json").write_text(json.dumps(state))


def _child(
    work: Callable[..., Coroutine[Any, Any, None]], case: Case, crash: str, *args: Any
) -> None:
    """A child process's body: arm the crash point (``boundary:n`` or ``""``) and do the work."""
    if crash:
        faults.arm(*_target(crash))
    try:
        asyncio.run(work(case, *args))
    except BaseException:
        case.path("child.err").write_text(traceback.format_exc())
        os._exit(1)
    os._exit(0)


def _target(crash: str) -> tuple[str, int]:
    name, _, nth = crash.partition(":")
    return name, int(nth or 1)


_CONTEXT: Any = None


def context() -> Any:
    """The forkserver context the children come from (started once, teamgraph preloaded)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        # what tests.faultkit imports (the forkserver of Python 3.11 ignores the parent's
        # sys.path while preloading, so ``tests`` itself is imported in each child: cheap)
        _CONTEXT.set_forkserver_preload(["teamgraph.runtime.team_api", "teamgraph.testing"])
    return _CONTEXT


def in_child(
    work: Callable[..., Coroutine[Any, Any, None]], case: Case, crash: str = "", *args: Any
) -> int:
    """Run ``work(case, *args)`` in a child process; its exit code (137: it crashed as armed)."""
    process = context().Process(target=_child, args=(work, case, crash, *args))
    process.start()
    process.join(timeout=PROCESS_CEILING_S)
    if process.exitcode is None:
        process.kill()
        raise AssertionError(f"child still running after {PROCESS_CEILING_S:.0f} s: {case}")
    return int(process.exitcode)


def announced(events: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """The run's announcements: each plan, each step start, each tool call (by its step, agent,
    tool and arguments: call ids are the model's and differ between runs)."""
    for event in events:
        kind = event["type"]
        if kind == "plan_created":
            yield kind, event.get("plan_name", "")
        elif kind == "step_started":
            yield kind, event["step_id"]
        elif kind == "tool_called":
            args = json.dumps(event.get("args"), sort_keys=True)
            yield kind, f"{event.get('step_id')}:{event.get('agent')}:{event['tool']}:{args}"


class LockedOnce:
    """The lanes of a SQLite file whose ``n``-th operation finds it locked past its busy
    timeout (another process held the write lock too long)."""

    def __init__(self, lanes: Any, n: int) -> None:
        self.lanes, self.n, self.calls = lanes, n, 0

    async def run(self, operation: Any) -> Any:
        self.calls += 1
        if self.calls == self.n:
            raise sqlite3.OperationalError("database is locked")
        return await self.lanes.run(operation)
