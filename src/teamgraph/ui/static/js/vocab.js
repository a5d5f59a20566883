// The run vocabulary the server speaks, as teamgraph.status defines it (tests/ui check that the
// two agree). Everything in the workspace that groups statuses or event types reads it here.

/** Run statuses that are not over yet: executing, about to, or paused. */
export const OPEN = Object.freeze(["pending", "running", "interrupted"]);
/** Ended with an answer. */
export const FINISHED = Object.freeze(["completed", "completed_with_errors"]);
/** Waiting for a human. */
export const PAUSED = Object.freeze(["interrupted"]);
/** Ended without finishing (may be resumed). */
export const STOPPED = Object.freeze(["failed", "cancelled", "budget_exceeded"]);
/** Event types that end a run's execution. */
export const END_EVENTS = Object.freeze(["run_completed", "run_failed", "run_cancelled"]);
/** Event types that pause it (its stream ends there until it resumes). */
export const PAUSE_EVENTS = Object.freeze(["clarification_requested", "approval_requested"]);
