"""CLI start-up benchmark: how long ``teamgraph --help`` takes before it prints, against the
interpreter starting and doing nothing (``python -c pass``) — the baseline, in the same run.

Each command runs ``--rounds`` times (alternating, after one warm-up each, so the file cache is
warm for both); the figures are medians and the worst run. Target: ``teamgraph --help`` ≤ 0.3 s.
Also shown: ``python -c "import teamgraph"`` (the library's import cost).

Run ``python benchmarks/cli_startup.py`` (a few seconds) or ``--quick``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

TARGET_S = 0.3
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import teamgraph": [sys.executable, "-c", "import teamgraph"],
    "teamgraph --help": [sys.executable, "-m", "teamgraph", "--help"],
}


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke run)")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():
        timed(command)  # warm-up
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            times[name].append(timed(command))
    base = statistics.median(times["python -c pass"])
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:<18} median {median * 1000:6.1f} ms  max {max(values) * 1000:6.1f} ms"
            f"  ratio to python -c pass {median / base:5.1f}"
        )
    help_s = statistics.median(times["teamgraph --help"])
    verdict = "met" if help_s <= TARGET_S else "ABOVE TARGET"
    print(f"teamgraph --help target {TARGET_S * 1000:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
