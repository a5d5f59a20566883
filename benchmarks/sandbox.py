"""Sandbox start-up overhead: ``await Sandbox().run(code)`` vs a plain ``python -c`` subprocess.

Both run the same trivial code (``pass`` and ``1+1``), alternating, in the same process and event
loop. The time is the wall clock from the call to the result. The baseline is the same interpreter
(the project's virtual environment, with ``site``) started with ``asyncio.create_subprocess_exec``
and no isolation at all.

Run ``python benchmarks/sandbox.py`` (about 5 s) or ``--runs N``. Prints::

    sandbox startup median_ms <x> p90_ms <y>
    baseline startup median_ms <x> p90_ms <y>
    ratio sandbox/baseline <r>
    target sandbox median <= 150 ms PASS|MISS

The exit status is 0 unless a sandboxed run fails (wrong value or an error).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from teamgraph.sandbox import Sandbox

TARGET_MS = 150.0
CODES = {"pass": None, "1+1": "2"}


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


if __name__ == "__main__":
    main()
