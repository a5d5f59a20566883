"""An explicit plan is stored with its run's row, in one transaction (issue 31, item 8): a run
killed after its row is stored — before its first checkpoint, before anything else of it is
written — resumes on that plan, never on a plan of another tier."""

from __future__ import annotations

from pathlib import Path

from teamgraph import faults
from tests import faultkit
from tests.faultkit import TEAMS, Case, in_child

from .helpers import make_plan

PLAN = make_plan(("look", "researcher", []), ("write", "writer", ["look"]), name="given")


def _err(case: Case) -> str:
    err = case.path("child.err")
    return err.read_text() if err.exists() else ""


def test_a_run_killed_once_its_row_is_stored_resumes_on_its_explicit_plan(tmp_path: Path) -> None:
    assert "run.stored" in faults.BOUNDARIES
    case = Case(
        team=str(TEAMS / "research.yaml"),
        db=f"sqlite:///{tmp_path}/plan.db",
        folder=str(tmp_path),
        run_id="planned-1",
        plan=PLAN.model_dump_json(),
    )
    assert in_child(faultkit.start, case, "run.stored:1") == faults.CRASH_EXIT_CODE, _err(case)
    assert not [e for e in case.events("start") if e["type"] == "plan_created"]
    assert in_child(faultkit.resume, case, "", "resume") == 0, _err(case)
    plans = [e for e in case.events("resume") if e["type"] == "plan_created"]
    assert [(p["plan_name"], p["tier"]) for p in plans] == [("given", "explicit")]
    started = [e["step_id"] for e in case.events("resume") if e["type"] == "step_started"]
    assert sorted(started) == ["look", "write"]
    assert case.events("resume")[-1]["type"] == "run_completed"
