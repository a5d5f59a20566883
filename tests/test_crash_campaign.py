"""The random kill campaign of ``benchmarks/crash.py``, small: 10 ``kill -9`` at random instants
over workflow and swarm runs, each resumed until it completes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "crash.py"


def _campaign() -> Any:
    spec = importlib.util.spec_from_file_location("crash_campaign", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.campaign


def test_ten_random_kills_lose_nothing_and_repeat_nothing() -> None:
    tally = _campaign()(kills=10, seed=11, latency=0.03)
    assert tally.kills == 10 and tally.runs >= 2
    assert tally.steps_rerun == 0
    assert tally.lost_results == 0
    assert tally.token_difference == 0
    assert tally.duplicate_announcements == 0
    assert tally.asked_again == tally.asked_again_in_window  # only replies lost in the window
