"""Crash at every durability boundary, resume, and lose nothing and repeat nothing.

Each case runs an example team in a child process armed to end (``os._exit``, as ``kill -9``)
at one boundary (see :mod:`teamgraph.faults`), then resumes the run in a fresh child and compares
with the same team run uninterrupted: the run completes, no step recorded before the crash runs
again, the model calls asked again are exactly the replies that had returned but were not yet
journalled, usage equals the uninterrupted run's, and nothing is announced more often than in it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from teamgraph import Plan, Step, faults
from teamgraph.faults import CRASH_EXIT_CODE

from . import faultkit
from .counting_tools import PAYMENTS_REQUEST, PAYMENTS_TEAM
from .faultkit import TEAMS, Case, announced, in_child

PATTERNS = {
    "workflow": "research.yaml",
    "supervisor": "supervisor.yaml",
    "swarm": "swarm.yaml",
    "collaborative": "collaborative.yaml",
    "single": "single.yaml",
    "nested": "hierarchical.yaml",
}
# events.stored: server only (test_runs); run.stored: before anything runs (test_plan_durability)
BOUNDARIES = [b for b in faults.BOUNDARIES if b not in ("events.stored", "run.stored")]
WITHOUT = {  # boundaries a pattern's example team never passes (checked below)
    "supervisor": {"step.done", "step.recorded"},
    "swarm": {"step.done", "step.recorded"},
    "collaborative": {"step.done", "step.recorded"},
    "single": {"step.done", "step.recorded"},
}
CASES = [
    (pattern, boundary)
    for pattern in PATTERNS
    for boundary in BOUNDARIES
    if boundary not in WITHOUT.get(pattern, set())
]


def _case(tmp: Path, db: str, team: str) -> Case:
    return Case(team=team, db=db, folder=str(tmp), run_id=f"run-{uuid.uuid4().hex[:8]}")


_REFERENCE: dict[str, Case] = {}


def reference(pattern: str, tmp_factory: pytest.TempPathFactory) -> Case:
    """The pattern's team run once without a crash (kept for the session)."""
    if pattern not in _REFERENCE:
        tmp = tmp_factory.mktemp(f"ref-{pattern}")
        case = _case(tmp, f"sqlite:///{tmp}/ref.db", str(TEAMS / PATTERNS[pattern]))
        assert in_child(faultkit.start, case) == 0, _err(case)
        _REFERENCE[pattern] = case
    return _REFERENCE[pattern]


def _err(case: Case) -> str:
    err = case.path("child.err")
    return err.read_text() if err.exists() else "(no traceback)"


def _usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events and events[-1]["type"] == "run_completed", [e["type"] for e in events[-3:]]
    usage: dict[str, Any] = events[-1]["usage"]
    return usage


def test_the_example_teams_pass_the_boundaries_the_cases_expect(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    for pattern in PATTERNS:
        passed = {b for b, n in reference(pattern, tmp_path_factory).passes().items() if n}
        assert passed >= set(BOUNDARIES) - WITHOUT.get(pattern, set()), pattern
        assert not passed & WITHOUT.get(pattern, set()), pattern  # WITHOUT is up to date


def crash_and_resume(case: Case, ref: Case, boundary: str) -> int:
    """Crash at ``boundary`` half-way through the passes the uninterrupted run made, then
    resume; how many replies had returned before the crash."""
    nth = max(1, (ref.passes().get(boundary, 0) + 1) // 2)
    rc = in_child(faultkit.start, case, f"{boundary}:{nth}")
    assert rc == CRASH_EXIT_CODE, f"did not crash at {boundary} (exit {rc}): {_err(case)}"
    returned = sum(case.calls().values())
    assert in_child(faultkit.resume, case, "", "resume") == 0, _err(case)
    return returned


def check(case: Case, ref: Case, returned: int) -> None:
    before, after = case.events("start"), case.events("resume")
    assert after[0]["type"] == "resumed"
    assert _usage(after) == _usage(ref.events("start"))  # exact usage, nothing lost
    assert after[-1]["output"] == ref.events("start")[-1]["output"]  # the same answer

    seen = case.inspection()
    restarted = {e["step_id"] for e in after if e["type"] == "step_started"}
    assert not restarted & set(seen["recorded_steps"])  # no finished step re-run

    calls, expected = case.calls(), ref.calls()
    assert not expected - calls  # every call the run needs was made
    repeated = sum((calls - expected).values())
    assert repeated == returned - seen["journaled"]  # only replies lost in the window, once

    most = Counter(announced(ref.events("start")))
    for what, count in Counter(announced(before + after)).items():
        assert count <= most[what], f"{what} announced {count} times"
    # every step of the team has its outcome in the stored events, once, also when the crash
    # came between its record and its event (a nested team's steps are reported by its own run:
    # once, or not again when the step it worked for was already done)
    stored = outcomes(case.stored())
    assert set(stored.values()) <= {1}, stored
    expected = outcomes(ref.events("start"))
    assert {k for k in stored if not k[-2]} == {k for k in expected if not k[-2]}


def outcomes(events: list[dict[str, Any]]) -> Counter[tuple[str, ...]]:
    """Step outcome events by path, the step their team works for ("": the run's team), step."""
    kinds = ("step_completed", "step_failed", "step_skipped")
    return Counter(
        (*e["path"], e.get("parent_id") or "", e["step_id"]) for e in events if e["type"] in kinds
    )


@pytest.mark.parametrize(("pattern", "boundary"), CASES)
def test_a_crash_at_a_boundary_loses_and_repeats_nothing(
    pattern: str, boundary: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ref = reference(pattern, tmp_path_factory)
    case = _case(tmp_path, f"sqlite:///{tmp_path}/crash.db", str(TEAMS / PATTERNS[pattern]))
    check(case, ref, crash_and_resume(case, ref, boundary))


EXPLICIT = Plan(
    name="given",
    steps=[
        Step(id="facts", worker="researcher", task="Find the facts on both databases"),
        Step(id="report", worker="writer", task="Write the comparison", depends_on=["facts"]),
    ],
).model_dump_json()


@pytest.mark.parametrize("given", ["template", "plan"])
@pytest.mark.parametrize("boundary", ["checkpoint.before", "checkpoint.after", "step.recorded"])
def test_a_run_given_its_plan_crashed_at_its_first_pass_repeats_nothing(
    given: str, boundary: str, tmp_path: Path
) -> None:
    """A template's or an explicit plan is the run's input (no plan node): a crash before the
    first checkpoint starts the run again with that plan, announced once."""
    team = str(TEAMS / PATTERNS["workflow"])
    plan = {"template": "parallel_comparison"} if given == "template" else {"plan": EXPLICIT}
    ref = replace(_case(tmp_path / "ref", f"sqlite:///{tmp_path}/ref.db", team), **plan)
    case = replace(_case(tmp_path, f"sqlite:///{tmp_path}/crash.db", team), **plan)
    Path(ref.folder).mkdir()
    assert in_child(faultkit.start, ref) == 0, _err(ref)
    tiers = [e["tier"] for e in ref.events("start") if e["type"] == "plan_created"]
    assert tiers == ["template" if given == "template" else "explicit"]
    assert in_child(faultkit.start, case, f"{boundary}:1") == CRASH_EXIT_CODE, _err(case)
    returned = sum(case.calls().values())
    assert in_child(faultkit.resume, case, "", "resume") == 0, _err(case)
    check(case, ref, returned)
    plans = [e for e in case.events("start") + case.events("resume") if e["type"] == "plan_created"]
    tier = "template" if given == "template" else "explicit"
    assert [p["tier"] for p in plans] == [tier]
    steps = {e["step_id"] for e in case.events("resume") if e["type"] == "step_completed"}
    assert steps <= {s["id"] for s in plans[0]["steps"]}  # the given plan's steps, not a new one


@pytest.mark.parametrize(
    ("pattern", "boundary"), [(p, b) for p, b in CASES if p in ("workflow", "swarm")]
)
def test_on_postgres_too(
    pattern: str,
    boundary: str,
    pg_url: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    ref = reference(pattern, tmp_path_factory)
    case = _case(tmp_path, pg_url, str(TEAMS / PATTERNS[pattern]))
    check(case, ref, crash_and_resume(case, ref, boundary))


# --- approvals: an approved side effect runs at most once ---------------------------------------
def _payments(tmp: Path, db: str) -> Case:
    team = tmp / "payments.yaml"
    team.write_text(PAYMENTS_TEAM)
    return Case(
        team=str(team),
        db=db,
        folder=str(tmp),
        run_id="pay-1",
        request=PAYMENTS_REQUEST,
    )


@pytest.mark.parametrize("boundary", ["tool.done", "tool.journaled", "checkpoint.after"])
def test_an_approved_call_runs_at_most_once_whatever_the_crash(
    boundary: str, tmp_path: Path
) -> None:
    approved_once(_payments(tmp_path, f"sqlite:///{tmp_path}/pay.db"), boundary)


def test_an_approved_call_runs_at_most_once_on_postgres(pg_url: str, tmp_path: Path) -> None:
    approved_once(_payments(tmp_path, pg_url), "tool.done")


def approved_once(case: Case, boundary: str) -> None:
    """Pause for approval, approve and crash at ``boundary``, resume with no new reply: the
    approval given before the crash holds, and the charge is made once."""
    assert in_child(faultkit.start, case) == 0, _err(case)
    assert case.events("start")[-1]["type"] == "approval_requested" and case.charges() == 0

    rc = in_child(faultkit.resume, case, f"{boundary}:1", "approve", True)
    assert rc == CRASH_EXIT_CODE, _err(case)
    assert case.charges() == 1  # the side effect happened before the crash
    assert in_child(faultkit.resume, case, "", "resume") == 0, _err(case)
    after = case.events("resume")
    assert after[-1]["type"] == "run_completed" and case.charges() == 1
    returned = [e for e in after if e["type"] == "tool_returned"]
    if boundary == "tool.done":  # its result was lost: reported, not run again
        assert returned and returned[0]["is_error"] and "not run again" in returned[0]["output"]
    else:
        assert not returned  # its result was journalled; the step goes on from it
