"""One exception root, three families.

* :class:`ControlSignal` — signals to the run loop (retry a transient error, pause for a human).
* :class:`RunFailure` — a run or a step could not finish (step failed, budget exceeded, ...).
* :class:`UsageError` — the caller asked for something invalid (bad spec, unknown model, ...).

Only the edges translate these: the CLI into a readable message and an exit code, the server into a
JSON error with a status code.
"""

from __future__ import annotations


class TeamgraphError(Exception):
    """Root of every error teamgraph raises on purpose."""


# --- signals to the loop ---
class ControlSignal(TeamgraphError):
    """Not a failure: tells the run loop to do something (retry, pause)."""


class AwaitingHuman(ControlSignal):
    """A part of the run waits for a human's reply — a tool call for a decision, a nested team
    for an answer or decisions: the run pauses, and resumes once the reply is given."""


class ApprovalPending(AwaitingHuman):
    """A sensitive tool call waits for a human decision; the run pauses (and resumes later)."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"tool call {approval_id} waits for approval")
        self.approval_id = approval_id


class TransientModelError(ControlSignal):
    """A model call failed in a way worth retrying (timeout, 429, 5xx, connection reset)."""


# --- run failures ---
class RunFailure(TeamgraphError):
    """A run, or a part of it, could not complete."""


class MaxIterationsExceeded(RunFailure):
    """An agent kept calling tools past its ``max_iterations``."""

    def __init__(self, agent: str, limit: int) -> None:
        super().__init__(f"agent {agent!r} reached max_iterations={limit} without a final answer")
        self.agent = agent
        self.limit = limit


class RunStop(RunFailure):
    """Not one step's failure but the whole run's: it stops at once, keeping what was done, and
    may be resumed once the cause is gone (a budget raised, a provider back)."""


class BudgetExceeded(RunStop):
    """A run reached one of its budget limits; it stops, keeping what was done."""

    def __init__(self, limit: str, allowed: float, reached: float) -> None:
        super().__init__(f"budget exceeded: {limit}={allowed} reached ({reached})")
        self.limit, self.allowed, self.reached = limit, allowed, reached


class DatabaseUnavailable(RunStop):
    """The run's database could not be reached (restarted, connections cut, refused, a SQLite
    file locked past its busy timeout, a full disk). The run stopped where it was — nothing was
    marked failed — and resumes from its last checkpoint once the database answers again."""


class ModelUnavailable(RunStop):
    """A model provider cannot serve the run: still failing after the retries (timeouts, 429,
    5xx, connection errors) or refusing access (401, 403, 404 — a key or a model name to fix).
    The run stops; ``teamgraph resume`` continues it from where it stopped."""


class ModelCallFailed(RunFailure):
    """A model provider rejected one request (a 4xx other than access: bad request, context
    too long, ...). The message is the provider's own, keys removed. Not retried."""


class AgentFailed(RunFailure):
    """An agent could not produce an answer (empty replies, invalid structured output, ...)."""


class RunNotFound(RunFailure):
    """No run with this id exists in the run store."""


class LeaseLost(RunFailure):
    """This worker's lease on a run lapsed and another worker took the run over: this one
    stops executing it and writes nothing more to its row."""


# --- misuse ---
class UsageError(TeamgraphError):
    """The caller asked for something invalid."""


class SpecError(UsageError):
    """A team or agent specification is invalid. The message names file, field and value."""


class PlanValidationError(UsageError):
    """A plan breaks a rule (duplicate id, unknown worker, unknown dependency, cycle, size)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid plan: " + "; ".join(errors))
        self.errors = errors


class RunConflict(UsageError):
    """The run cannot do that in its current state: the session already has a running run, the
    run is paused, superseded, finished or not running (HTTP 409)."""


class ModelConfigError(UsageError):
    """A model string cannot be resolved (unknown provider, missing package, missing key)."""


class SandboxUnavailable(UsageError):
    """Code execution was refused because isolation is not available (never runs unsandboxed)."""


class ToolNotFound(UsageError):
    """A spec names a tool that no registry provides."""
