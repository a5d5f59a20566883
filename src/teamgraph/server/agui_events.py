"""teamgraph's events told as AG-UI events (the ``ag-ui-protocol`` package's types).

One teamgraph run execution becomes one AG-UI run: ``RUN_STARTED``; the plan as a
``STATE_SNAPSHOT`` (``{plan: {name, tier, steps: [{id, worker, task, status}]}}``) and each step's
progress as ``STEP_STARTED``/``STEP_FINISHED`` with a ``STATE_DELTA`` (JSON Patch) of its status;
tool calls as ``TOOL_CALL_START``/``ARGS``/``END`` and ``TOOL_CALL_RESULT``; the answer as one
assistant text message (``TEXT_MESSAGE_START``/``CONTENT``/``END``, token by token where one
agent writes it); then ``RUN_FINISHED`` — with the shared state in a last snapshot, the run's
token usage, and the outcome ``success``, ``cancelled`` or ``interrupt`` (a clarifying question,
or tool calls waiting for approval, each an :class:`~ag_ui.core.Interrupt` a later run answers
with ``resume`` entries) — or ``RUN_ERROR``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from teamgraph.events import Event
from teamgraph.server.progress import Telling

CLARIFICATION = "clarification"
APPROVAL = "tool_approval"
ANSWER_SCHEMA: dict[str, Any] = {"type": "string", "description": "The answer to the question."}
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "reject", "edit"]},
        "comment": {"type": "string"},
        "args": {"type": "object", "description": "The edited arguments (edit)."},
    },
    "required": ["action"],
}


def clarification_id(run_id: str) -> str:
    """The interrupt id of a run's clarifying question."""
    return f"{run_id}:{CLARIFICATION}"


@dataclass
class Translation:
    """Folds one execution's teamgraph events into AG-UI events, in order."""

    thread_id: str
    run_id: str  # the client's id for this AG-UI run
    pattern: str
    teamgraph_run: str = ""  # the teamgraph run it executes
    telling: Telling = field(init=False)
    steps: list[str] = field(default_factory=list)
    message_id: str | None = None
    question: str = ""
    approvals: list[dict[str, Any]] = field(
        default_factory=list
    )  # {id, agent, tool, args, call_id}
    state: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.telling = Telling(self.pattern, separate=True)

    def start(self) -> list[BaseEvent]:
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def events(self, event: Event) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if event.type == "plan_created":
            self.steps = [s["id"] for s in event.steps]
            plan = {
                "name": event.plan_name,
                "tier": event.tier,
                "steps": [
                    {"id": s["id"], "worker": s["worker"], "task": s["task"], "status": "pending"}
                    for s in event.steps
                ],
            }
            out.append(StateSnapshotEvent(snapshot={"plan": plan}))
        elif event.type == "step_started" and event.step_id in self.steps:
            out += [
                StepStartedEvent(step_name=event.step_id),
                self._status(event.step_id, "running"),
            ]
        elif event.type in ("step_completed", "step_failed") and event.step_id in self.steps:
            status = "done" if event.type == "step_completed" else "failed"
            out += [self._status(event.step_id, status), StepFinishedEvent(step_name=event.step_id)]
        elif event.type == "tool_called":
            out += self._close_text()
            call = event.call_id or uuid.uuid4().hex
            out += [
                ToolCallStartEvent(tool_call_id=call, tool_call_name=event.tool),
                ToolCallArgsEvent(tool_call_id=call, delta=json.dumps(event.args)),
                ToolCallEndEvent(tool_call_id=call),
            ]
        elif event.type == "tool_returned":
            out += self._close_text()
            out.append(
                ToolCallResultEvent(
                    message_id=uuid.uuid4().hex,
                    tool_call_id=event.call_id,
                    content=event.output,
                    role="tool",
                )
            )
        elif event.type == "clarification_requested":
            self.question = event.question
        elif event.type == "approval_requested":
            self.approvals.append(
                {
                    "id": event.request_id,
                    "agent": event.agent,
                    "tool": event.tool,
                    "args": event.args,
                    "call_id": event.call_id,
                }
            )
        elif event.type == "run_completed":
            self.state = event.shared_state
        kind, text = self.telling.piece(event)
        if kind == "answer" and text and event.type != "clarification_requested":
            out += self._text(text)
        return out

    def finish(self, status: str, error: str, usage: Any) -> list[BaseEvent]:
        """The run's end: its last state, and how it finished (or failed)."""
        out = self._close_text()
        if self.state is not None:
            out.append(StateSnapshotEvent(snapshot={"shared_state": self.state}))
        if status == "failed":
            return [*out, RunErrorEvent(message=error or "the run failed", code="run_failed")]
        used = TokenUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
        )
        outcome: Any = RunFinishedSuccessOutcome()
        if status == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        elif self.question or self.approvals:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts())
        finished = RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, usage=[used]
        )
        return [*out, finished]

    def _interrupts(self) -> list[Interrupt]:
        found = []
        if self.question:
            found.append(
                Interrupt(
                    id=clarification_id(self.teamgraph_run),
                    reason=CLARIFICATION,
                    message=self.question,
                    response_schema=ANSWER_SCHEMA,
                )
            )
        for asked in self.approvals:
            call = f"{asked['tool']}({json.dumps(asked['args'], ensure_ascii=False)})"
            found.append(
                Interrupt(
                    id=asked["id"],
                    reason=APPROVAL,
                    message=f"{asked['agent']} wants to call {call}",
                    tool_call_id=asked["call_id"],
                    response_schema=DECISION_SCHEMA,
                )
            )
        return found

    def _status(self, step_id: str, status: str) -> StateDeltaEvent:
        index = self.steps.index(step_id)
        patch = [{"op": "replace", "path": f"/plan/steps/{index}/status", "value": status}]
        return StateDeltaEvent(delta=patch)

    def _text(self, text: str) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self.message_id is None:
            self.message_id = uuid.uuid4().hex
            out.append(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
        out.append(TextMessageContentEvent(message_id=self.message_id, delta=text))
        return out

    def _close_text(self) -> list[BaseEvent]:
        if self.message_id is None:
            return []
        closed, self.message_id = self.message_id, None
        return [TextMessageEndEvent(message_id=closed)]
