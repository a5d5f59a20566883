"""The vocabulary of how runs and steps stand, defined once (the web workspace's
``js/vocab.js`` is tested against it)."""

from __future__ import annotations

from typing import Literal

RunStatus = Literal[
    "pending",
    "running",
    "completed",
    "completed_with_errors",
    "failed",
    "cancelled",
    "interrupted",
    "budget_exceeded",
]
StepState = Literal["pending", "running", "waiting", "done", "failed", "skipped"]

FINISHED: frozenset[RunStatus] = frozenset({"completed", "completed_with_errors"})
"""Ended with an answer: nothing left to resume."""
PAUSED: frozenset[RunStatus] = frozenset({"interrupted"})
"""Waiting for a human (an answer, a decision): resumes with the reply."""
STOPPED: frozenset[RunStatus] = frozenset({"failed", "cancelled", "budget_exceeded"})
"""Ended without finishing: may be resumed from its last checkpoint."""
EXECUTING: frozenset[RunStatus] = frozenset({"pending", "running"})
"""Queued for a worker or executing somewhere."""
OPEN: frozenset[RunStatus] = frozenset({"pending", "running", "interrupted"})
"""Not over yet: executing, about to, or paused."""

END_EVENTS = ("run_completed", "run_failed", "run_cancelled")
"""Event types that end a run's execution."""
PAUSE_EVENTS = ("clarification_requested", "approval_requested")
"""Event types that pause a run's execution (its stream ends there, until it resumes)."""
