"""Crash points, for fault-injection tests of durability.

``point(name)`` marks a durability boundary in the code (a model reply received, its journal
write done, a tool's side effect done, a step recorded, a checkpoint written, events stored). When
the environment of the process says ``TEAMGRAPH_CRASH_AT=<name>:<n>``, the process ends at once
(``os._exit``, like a ``kill -9``: no cleanup, no flush) at its ``n``-th pass through that point.
Otherwise ``point`` does nothing. The variable is read once, when this module is imported;
:func:`arm` sets the target in a process that is already running (a forked test child).
"""

from __future__ import annotations

import os
import sys
from collections import Counter

BOUNDARIES = (
    "run.stored",  # a new run's row is stored, nothing else of the run yet
    "model.done",  # a model reply is in memory, not yet journalled
    "model.journaled",  # ... and journalled
    "tool.done",  # a tool call's side effect is done, its result not yet journalled
    "tool.journaled",  # ... and journalled
    "step.done",  # a workflow step has its result, not yet recorded in the ledger
    "step.recorded",  # ... and recorded
    "checkpoint.before",  # a checkpoint is about to be written
    "checkpoint.after",  # ... and written
    "events.stored",  # a batch of events was stored (server)
)
CRASH_EXIT_CODE = 137  # what a shell reports for a process killed by SIGKILL


def _target(value: str) -> tuple[str, int] | None:
    if not value:
        return None
    name, _, count = value.partition(":")
    if name not in BOUNDARIES:
        raise ValueError(f"TEAMGRAPH_CRASH_AT: unknown boundary {name!r}; known: {BOUNDARIES}")
    return name, int(count or 1)


_TARGET = _target(os.environ.get("TEAMGRAPH_CRASH_AT", ""))
_passes = 0
_counts: Counter[str] | None = None


def count() -> Counter[str]:
    """Count every pass through every boundary from now on (in this process); the counts."""
    global _counts
    _counts = Counter()
    return _counts


def arm(boundary: str, nth: int = 1) -> None:
    """Crash this process at its ``nth`` pass through ``boundary`` from now on."""
    global _TARGET, _passes
    _TARGET, _passes = _target(f"{boundary}:{nth}"), 0


def point(name: str) -> None:
    """A durability boundary: crash here when armed for it (see the module's docstring)."""
    global _passes
    if _counts is not None:
        _counts[name] += 1
    if _TARGET is None or _TARGET[0] != name:
        return
    _passes += 1
    if _passes >= _TARGET[1]:
        sys.stderr.write(f"teamgraph: crashing at {name} (pass {_passes})\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
