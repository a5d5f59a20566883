"""What a run looks like so far, folded from its events (used by the CLI's live table).

The web workspace folds the same events in ``ui/static/js/runstate.js``; tests/ui check that the
two agree on every event log they are given (status, plan, step states and tokens, usage)."""

from __future__ import annotations

from dataclasses import dataclass, field

from teamgraph.events import (
    AgentMessage,
    AgentStarted,
    ApprovalRequested,
    BaseEvent,
    ClarificationRequested,
    Handoff,
    PlanCreated,
    Resumed,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStatus,
    StepCompleted,
    StepFailed,
    StepSkipped,
    StepStarted,
    StepState,
    TokenUsage,
    ToolCalled,
    UsageRecorded,
)


@dataclass
class StepView:
    id: str
    worker: str
    task: str
    state: StepState = "pending"
    started_ts: float | None = None
    elapsed_s: float | None = None
    tokens: int = 0
    detail: str = ""


@dataclass
class AgentView:
    """An agent of a run without a plan (single, supervisor, swarm, collaborative): whether it
    is at work, what it last did, the tokens it used."""

    name: str
    state: StepState = "running"
    tokens: int = 0
    detail: str = ""


@dataclass
class RunView:
    """The state of one run, updated event by event."""

    run_id: str = ""
    plan_name: str = ""
    tier: str = ""
    confidence: float = 0.0
    plan_notes: list[str] = field(default_factory=list)
    steps: dict[str, StepView] = field(default_factory=dict)
    usage: TokenUsage = field(default_factory=TokenUsage)
    status: RunStatus = "running"
    output: str = ""
    error: str = ""
    done_before_resume: list[str] = field(default_factory=list)
    works_for: dict[tuple[str, ...], str] = field(default_factory=dict)  # nested team → its step
    agents: dict[str, AgentView] = field(default_factory=dict)  # top-level agents, by name

    def apply(self, event: BaseEvent) -> None:
        self.run_id = event.run_id
        team = tuple(event.path[:-1] if not isinstance(event, PlanCreated) else event.path)
        if len(team) > 1 and event.parent_id:
            self.works_for.setdefault(team, event.parent_id)
        if _nested(event):  # nested teams' plans and steps belong to their own views
            return
        handler = getattr(self, f"_on_{type(event).__name__}", None)
        if handler is not None:
            handler(event)

    def _on_PlanCreated(self, e: PlanCreated) -> None:
        self.plan_name, self.tier, self.confidence = e.plan_name, e.tier, e.confidence
        self.plan_notes = list(e.notes)
        self.steps = {s["id"]: StepView(s["id"], s["worker"], s["task"]) for s in e.steps}
        for step_id in self.done_before_resume:
            if step_id in self.steps:
                self.steps[step_id].state = "done"
                self.steps[step_id].detail = "done before resume"

    def _on_Resumed(self, e: Resumed) -> None:
        self.done_before_resume = list(e.completed_steps)
        self.status = "running"
        if e.plan_name is not None and not self.steps:  # following the run from here
            self.plan_name, self.confidence = e.plan_name, e.confidence or 0.0
            self.tier = e.tier or ""
            self.steps = {s["id"]: StepView(s["id"], s["worker"], s["task"]) for s in e.steps}
        for step_id in self.done_before_resume:
            if step_id in self.steps and self.steps[step_id].state != "done":
                self.steps[step_id].state = "done"
                self.steps[step_id].detail = "done before resume"

    def _on_ApprovalRequested(self, e: ApprovalRequested) -> None:
        self.status = "interrupted"
        if e.step_id and e.step_id in self.steps:
            self.steps[e.step_id].state = "waiting"
            self.steps[e.step_id].detail = f"waits for approval of {e.tool}"

    def _on_ClarificationRequested(self, e: ClarificationRequested) -> None:
        self.status = "interrupted"

    def _on_StepStarted(self, e: StepStarted) -> None:
        step = self._step(e.step_id, e.worker)
        step.state, step.started_ts = "running", e.ts.timestamp()

    def _on_StepCompleted(self, e: StepCompleted) -> None:
        step = self._step(e.step_id, e.worker)
        step.state, step.elapsed_s = "done", e.elapsed_s
        step.tokens = e.usage.total_tokens

    def _on_StepFailed(self, e: StepFailed) -> None:
        step = self._step(e.step_id, e.worker)
        step.state, step.elapsed_s, step.detail = "failed", e.elapsed_s, e.error

    def _on_StepSkipped(self, e: StepSkipped) -> None:
        step = self._step(e.step_id, e.worker)
        step.state, step.detail = "skipped", e.reason

    def _on_UsageRecorded(self, e: UsageRecorded) -> None:
        self.usage = self.usage + e.usage
        step_id = self._root_step(tuple(e.path[:-1]), e.step_id)
        if step_id and step_id in self.steps:
            self.steps[step_id].tokens += e.usage.total_tokens
        if len(e.path) == 2:
            self._agent(e.agent).tokens += e.usage.total_tokens

    def _on_AgentStarted(self, e: AgentStarted) -> None:
        if len(e.path) == 2:
            self._agent(e.agent).state = "running"

    def _on_AgentMessage(self, e: AgentMessage) -> None:
        if len(e.path) == 2:
            agent = self._agent(e.agent)
            agent.state, agent.detail = "done", f"answered ({len(e.content)} characters)"

    def _on_ToolCalled(self, e: ToolCalled) -> None:
        if len(e.path) == 2:
            self._agent(e.agent).detail = f"calls {e.tool}"

    def _on_Handoff(self, e: Handoff) -> None:
        if e.from_agent != e.to_agent and len(e.path) == 2:
            handing = self._agent(e.from_agent)
            handing.state, handing.detail = "done", f"→ {e.to_agent}"
            self._agent(e.to_agent).state = "running"

    def _agent(self, name: str) -> AgentView:
        return self.agents.setdefault(name, AgentView(name))

    def _root_step(self, team: tuple[str, ...], step_id: str | None) -> str | None:
        """The top-level step a nested team's work is charged to (through every level)."""
        while len(team) > 1:
            step_id = self.works_for.get(team)
            team = team[:-1]
        return step_id

    def _on_RunCompleted(self, e: RunCompleted) -> None:
        self.status, self.output, self.usage = e.status, e.output, e.usage

    def _on_RunFailed(self, e: RunFailed) -> None:
        self.status, self.error = "failed", e.error

    def _on_RunCancelled(self, e: RunCancelled) -> None:
        self.status, self.error = "cancelled", e.reason

    def _step(self, step_id: str, worker: str) -> StepView:
        if step_id not in self.steps:
            self.steps[step_id] = StepView(step_id, worker, "")
        return self.steps[step_id]


_STEP_EVENTS = (StepStarted, StepCompleted, StepFailed, StepSkipped)


def _nested(event: BaseEvent) -> bool:
    if isinstance(event, PlanCreated):
        return len(event.path) > 1
    if isinstance(event, _STEP_EVENTS):
        return len(event.path) > 2
    return False
