"""Sandbox start-up overhead, and how soon a limit stops runaway code.

**Start-up**: ``await Sandbox().run(code)`` vs a plain ``python -c`` subprocess. Both run the same
trivial code (``pass`` and ``1+1``), alternating, in the same process and event loop. The time is
the wall clock from the call to the result. The baseline is the same interpreter (the project's
virtual environment, with ``site``) started with ``asyncio.create_subprocess_exec`` and no
isolation at all.

**Limits** (the timings the test suite does not assert, since a loaded machine stretches them):
a Python busy loop and a loop stuck in C against a 1 s CPU limit, a fork bomb against the process
limit, and a sleep against a 1.5 s wall-clock limit; each the wall time from the call to the
result, and how far past its limit that is.

Run ``python benchmarks/sandbox.py`` (about 15 s) or ``--runs N``. Prints::

    sandbox startup median_ms <x> p90_ms <y>
    baseline startup median_ms <x> p90_ms <y>
    ratio sandbox/baseline <r>
    target sandbox median <= 150 ms PASS|MISS
    limit <case> <limit name> stopped_after_s <x> (limit <y> s) target <= <y + 3> s PASS|MISS

The exit status is 0 unless a sandboxed run fails (wrong value or an error) or a limit case is
stopped by another limit than its own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from teamgraph.sandbox import Sandbox, SandboxLimits

TARGET_MS = 150.0
CODES = {"pass": None, "1+1": "2"}
LIMIT_SLACK_S = 3.0  # a limit should stop its run within this long after it is reached
FORK_BOMB = "import os\nwhile True:\n    os.fork()"
# case: (code, limits, the limit that must stop it, its value in seconds; 0: as fast as it can)
LIMIT_CASES: dict[str, tuple[str, SandboxLimits, str, float]] = {
    "python-busy-loop": (
        "while True:\n    pass",
        SandboxLimits(wall_time_s=60, cpu_time_s=1),
        "cpu_time",
        1.0,
    ),
    "c-busy-loop": (
        "sum(range(10**15))",
        SandboxLimits(wall_time_s=60, cpu_time_s=1),
        "cpu_time",
        2.0,
    ),
    "fork-bomb": (FORK_BOMB, SandboxLimits(wall_time_s=60, max_processes=16), "processes", 0.0),
    "sleep": ("import time\ntime.sleep(60)", SandboxLimits(wall_time_s=1.5), "wall_time", 1.5),
}


async def sandbox_once(sandbox: Sandbox, code: str) -> float:
    start = time.perf_counter()
    result = await sandbox.run(code)
    elapsed = (time.perf_counter() - start) * 1000
    if result.error is not None or result.value != CODES[code]:
        raise SystemExit(f"sandboxed run of {code!r} failed: {result.to_text()}")
    return elapsed


async def baseline_once(code: str) -> float:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
    await proc.wait()
    return (time.perf_counter() - start) * 1000


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(runs: int) -> tuple[list[float], list[float]]:
    sandbox = Sandbox()
    Sandbox.check()
    sandboxed: list[float] = []
    baseline: list[float] = []
    steps: list[tuple[list[float], Callable[[str], Awaitable[float]]]] = [
        (sandboxed, lambda code: sandbox_once(sandbox, code)),
        (baseline, baseline_once),
    ]
    for code in CODES:  # warm-up, not counted
        for _, once in steps:
            await once(code)
    for i in range(runs):
        code = list(CODES)[i % len(CODES)]
        for samples, once in steps:
            samples.append(await once(code))
    return sandboxed, baseline


def report(name: str, samples: list[float]) -> float:
    median = statistics.median(samples)
    print(f"{name} startup median_ms {median:.1f} p90_ms {percentile(samples, 0.9):.1f}")
    return median


async def limits() -> None:
    """How long each runaway case runs before its own limit stops it (the C loop's hard limit
    is one second over the CPU limit: the kernel's SIGKILL, where no Python handler runs)."""
    for case, (code, case_limits, expected, limit_s) in LIMIT_CASES.items():
        start = time.perf_counter()
        result = await Sandbox(case_limits).run(code)
        elapsed = time.perf_counter() - start
        if result.limit != expected:
            raise SystemExit(f"{case}: stopped by {result.limit!r}, not {expected!r}")
        target = limit_s + LIMIT_SLACK_S
        verdict = "PASS" if elapsed <= target else "MISS"
        print(
            f"limit {case} {expected} stopped_after_s {elapsed:.2f} (limit {limit_s:g} s) "
            f"target <= {target:g} s {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="measured runs per variant")
    args = parser.parse_args()
    sandboxed, baseline = asyncio.run(measure(args.runs))
    sandbox_median = report("sandbox", sandboxed)
    baseline_median = report("baseline", baseline)
    print(f"ratio sandbox/baseline {sandbox_median / baseline_median:.2f}")
    verdict = "PASS" if sandbox_median <= TARGET_MS else "MISS"
    print(f"target sandbox median <= {TARGET_MS:.0f} ms {verdict}")
    asyncio.run(limits())


if __name__ == "__main__":
    main()
