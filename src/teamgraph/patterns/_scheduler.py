"""Deciding what runs next in a workflow (pure; the executor does the running).

:class:`Schedule` keeps, for every pending step, how many of its dependencies are not done yet,
so a finished step costs only the work of its own dependants — never a scan of the whole plan.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from teamgraph.events import StepState
from teamgraph.plan import Plan, Step


class Schedule:
    """Step states of one execution and what follows from them: which pending steps are ready
    (all their dependencies done) and which can never run (a dependency failed or was skipped).

    Every state change goes through :meth:`set`; queries return steps in plan order."""

    def __init__(self, plan: Plan, states: dict[str, StepState]) -> None:
        self.steps = plan.steps
        self.states = states
        self._index = {s.id: i for i, s in enumerate(plan.steps)}
        self._dependants: dict[str, list[int]] = {s.id: [] for s in plan.steps}
        self._unmet: list[int] = []
        for i, step in enumerate(plan.steps):
            for dep in step.depends_on:
                self._dependants[dep].append(i)
            self._unmet.append(sum(states[d] != "done" for d in step.depends_on))
        pending = [i for i, s in enumerate(plan.steps) if states[s.id] == "pending"]
        self._ready = [i for i in pending if self._unmet[i] == 0]  # a heap of plan positions
        heapq.heapify(self._ready)
        self._doomed = {i for i in pending if self._reason(self.steps[i])}  # may be blocked
        self.failed = any(v == "failed" for v in states.values())

    def set(self, step_id: str, state: StepState) -> None:
        """Record a step's new state; dependants become ready or blocked accordingly."""
        before = self.states[step_id]
        self.states[step_id] = state
        if state == "failed":
            self.failed = True
        if state == before:
            return
        i = self._index[step_id]
        if state == "pending" and self._unmet[i] == 0:
            heapq.heappush(self._ready, i)  # handed back (it never started its work)
        if "done" in (state, before):
            delta = -1 if state == "done" else 1
            for d in self._dependants[step_id]:
                self._unmet[d] += delta
                if self._unmet[d] == 0 and self.states[self.steps[d].id] == "pending":
                    heapq.heappush(self._ready, d)
        if state in ("failed", "skipped"):
            self._doomed.update(self._dependants[step_id])

    def ready(self, limit: int | None = None) -> list[Step]:
        """Up to ``limit`` pending steps whose dependencies are all done, in plan order, removed
        from the ready set (the caller starts them)."""
        taken: list[int] = []
        while self._ready and (limit is None or len(taken) < limit):
            i = heapq.heappop(self._ready)
            if taken and taken[-1] == i:
                continue  # a step handed back may sit in the heap twice
            if self.states[self.steps[i].id] == "pending" and self._unmet[i] == 0:
                taken.append(i)
        return [self.steps[i] for i in taken]

    def blocked(self) -> dict[str, str]:
        """Pending steps that can never run, in plan order, with the reason (the first of their
        dependencies, in ``depends_on`` order, that failed or was skipped)."""
        doomed, self._doomed = sorted(self._doomed), set()
        blocked: dict[str, str] = {}
        for i in doomed:
            step = self.steps[i]
            if self.states[step.id] == "pending" and (reason := self._reason(step)):
                blocked[step.id] = reason
        return blocked

    def first_failed(self) -> str | None:
        return next((k for k, v in self.states.items() if v == "failed"), None)

    def unfinished(self) -> Iterable[Step]:
        """Steps still pending, running or waiting, in plan order."""
        return [s for s in self.steps if self.states[s.id] in ("pending", "running", "waiting")]

    def _reason(self, step: Step) -> str:
        for dep in step.depends_on:
            if self.states[dep] in ("failed", "skipped"):
                verb = "failed" if self.states[dep] == "failed" else "was skipped"
                return f"dependency {dep!r} {verb}"
        return ""


def ready_steps(plan: Plan, states: dict[str, StepState]) -> list[Step]:
    """Pending steps whose own dependencies are all done, in plan order."""
    return Schedule(plan, dict(states)).ready()


def blocked_steps(plan: Plan, states: dict[str, StepState]) -> dict[str, str]:
    """Pending steps that can never run, with the reason (a dependency failed or was skipped)."""
    return Schedule(plan, dict(states)).blocked()
