"""A random kill campaign: ``kill -9`` at random instants over workflow and swarm runs, resume after
each kill, and count what was lost or repeated against the same run uninterrupted.

    .venv/bin/python benchmarks/crash.py [--kills 100] [--seed 7] [--latency 0.05]

Each run is killed at a random instant within the uninterrupted run's duration, then resumed
(and killed again, at random, until it completes). Printed: kills, resumes, model calls asked
again (and how many of them had returned but were not journalled at the kill — the documented
window), finished steps re-run, lost results, token difference, duplicate announcements; and the
measured window between a reply's arrival and its durable journal entry. Targets: every count
but "asked again inside the window" is 0.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import faultkit  # noqa: E402
from tests.faultkit import TEAMS, Case, announced  # noqa: E402

TEAM_FILES = {"workflow": "research.yaml", "swarm": "swarm.yaml"}


@dataclass
class Tally:
    kills: int = 0
    resumes: int = 0
    asked_again: int = 0
    asked_again_in_window: int = 0
    steps_rerun: int = 0
    lost_results: int = 0
    token_difference: int = 0
    duplicate_announcements: int = 0
    runs: int = 0

    def ok(self) -> bool:
        return not (
            self.asked_again - self.asked_again_in_window
            or self.steps_rerun
            or self.lost_results
            or self.token_difference
            or self.duplicate_announcements
        )


def _started(case: Case, phase: str, crash: str = "") -> BaseProcess:
    work = faultkit.start if phase == "start" else faultkit.resume
    args = () if phase == "start" else (phase,)
    process = faultkit.context().Process(target=faultkit._child, args=(work, case, crash, *args))
    process.start()
    return process


def _killed_at_random(case: Case, phase: str, after_s: float) -> bool:
    """Start ``phase``; SIGKILL it after ``after_s`` unless it ended; whether it was killed."""
    process = _started(case, phase)
    process.join(timeout=after_s)
    if process.exitcode is None:
        process.kill()
        process.join()
        return True
    assert process.exitcode == 0, case.path("child.err").read_text()
    return False


def _journaled(case: Case) -> int | None:
    """Model replies in the run's journal now (read in a child); None if the run was killed
    before its row was stored (there is nothing to resume: it is started again)."""
    assert faultkit.in_child(faultkit.inspect, case) == 0, case.path("child.err").read_text()
    seen = json.loads(case.path("inspect.json").read_text())
    return int(seen["journaled"]) if seen.get("exists", True) else None


KILLS_PER_RUN = 3


def campaign(kills: int, seed: int, latency: float) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        refs = {name: _reference(Path(tmp), name, latency) for name in TEAM_FILES}
        while tally.kills < kills:
            name = list(TEAM_FILES)[tally.runs % len(TEAM_FILES)]
            ref, duration = refs[name]
            folder = Path(tmp) / f"run{tally.runs}"
            folder.mkdir()
            case = Case(
                team=ref.team, db=f"sqlite:///{folder}/db.sqlite", folder=str(folder),
                run_id=f"r-{uuid.uuid4().hex[:8]}", latency=latency,
            )  # fmt: skip
            _one_run(case, ref, duration, rng, tally, kills)
            tally.runs += 1
    return tally


def _reference(tmp: Path, name: str, latency: float) -> tuple[Case, float]:
    folder = tmp / f"ref-{name}"
    folder.mkdir()
    case = Case(
        team=str(TEAMS / TEAM_FILES[name]), db=f"sqlite:///{folder}/db.sqlite",
        folder=str(folder), run_id="ref", latency=latency,
    )  # fmt: skip
    began = time.perf_counter()
    assert faultkit.in_child(faultkit.start, case) == 0
    return case, time.perf_counter() - began


def _one_run(
    case: Case, ref: Case, duration: float, rng: random.Random, tally: Tally, kills: int
) -> None:
    """Kill the run at random instants, resuming after each kill, until it completes (at most
    :data:`KILLS_PER_RUN` kills per run, so every team of the campaign is killed too, however
    slowly a loaded machine runs them)."""
    phase, lost, mine = "start", 0, 0
    while (
        tally.kills < kills
        and mine < KILLS_PER_RUN
        and _killed_at_random(case, phase, rng.uniform(0.05, duration))
    ):
        tally.kills += 1
        mine += 1
        journaled = _journaled(case)
        if journaled is None:
            continue  # killed before the run was stored: start it again
        lost = sum(case.calls().values()) - journaled  # returned, not journalled, so far
        phase = "resume"
        tally.resumes += 1
    if phase == "resume" and (not case.events("resume") or _open(case.events("resume"))):
        assert faultkit.in_child(faultkit.resume, case, "", "resume") == 0  # the campaign ended
    elif phase == "start" and _open(case.events("start")):
        return  # killed before its first event and the campaign ended: nothing to score
    _score(case, ref, lost, tally)


def _open(events: list[dict[str, object]]) -> bool:
    return not events or events[-1]["type"] != "run_completed"


def _score(case: Case, ref: Case, lost_window: int, tally: Tally) -> None:
    events = case.events("start") + case.events("resume")
    expected = ref.events("start")
    final = events[-1]
    tally.lost_results += int(final.get("output") != expected[-1].get("output"))
    tally.token_difference += abs(
        final["usage"]["input_tokens"] + final["usage"]["output_tokens"]
        - expected[-1]["usage"]["input_tokens"] - expected[-1]["usage"]["output_tokens"]
    )  # fmt: skip
    again = sum((case.calls() - ref.calls()).values())
    tally.asked_again += again
    tally.asked_again_in_window += min(again, lost_window)
    completed: set[tuple[str, ...]] = set()
    for event in events:
        step = (*event.get("path", []), str(event.get("step_id")))
        if event["type"] == "step_started" and step in completed:
            tally.steps_rerun += 1
        if event["type"] == "step_completed":
            completed.add(step)
    most = Counter(announced(expected))
    tally.duplicate_announcements += sum(
        max(0, n - most[what]) for what, n in Counter(announced(events)).items()
    )


def window(runs: int = 5) -> list[float]:
    """Milliseconds from a reply's last chunk to its journal entry being committed (SQLite,
    in-process, the workflow team): the only span in which a crash loses a paid reply."""
    import asyncio

    from teamgraph import Team, durable
    from teamgraph.config import Settings

    arrived: dict[int, float] = {}
    spans: list[float] = []
    real_point = durable.point

    class Timed(faultkit.LoggedOffline):
        def _log(self, messages: list[Any]) -> None:
            arrived[id(asyncio.current_task())] = time.perf_counter()

    def timed_point(name: str) -> None:
        if name == "model.journaled":
            spans.append(1000 * (time.perf_counter() - arrived[id(asyncio.current_task())]))
        real_point(name)

    durable.point = timed_point  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(database_url=f"sqlite:///{tmp}/w.db")
            team = Team.from_yaml(TEAMS / "research.yaml", settings=settings, model=Timed())
            for _ in range(runs):
                asyncio.run(team.run(faultkit.REQUEST))
    finally:
        durable.point = real_point
    return sorted(spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    began = time.perf_counter()
    tally = campaign(args.kills, args.seed, args.latency)
    print(f"runs {tally.runs}, kills {tally.kills}, resumes {tally.resumes} "
          f"({time.perf_counter() - began:.0f} s)")  # fmt: skip
    print(f"model calls asked again: {tally.asked_again} "
          f"(inside the window: {tally.asked_again_in_window})")  # fmt: skip
    print(f"finished steps re-run: {tally.steps_rerun} (target 0)")
    print(f"lost results: {tally.lost_results} (target 0)")
    print(f"token difference from uninterrupted runs: {tally.token_difference} (target 0)")
    print(f"duplicate announcements: {tally.duplicate_announcements} (target 0)")
    spans = window()
    print(f"reply → journal entry committed: p50 {spans[len(spans) // 2]:.2f} ms, "
          f"p99 {spans[int(len(spans) * 0.99)]:.2f} ms, max {spans[-1]:.2f} ms "
          f"({len(spans)} replies)")  # fmt: skip
    print("all targets met" if tally.ok() else "TARGET MISSED")
    sys.exit(0 if tally.ok() else 1)


if __name__ == "__main__":
    main()
