"""``POST /agui/{team}``: run a team from an AG-UI ``RunAgentInput`` and stream AG-UI events (the
``ag-ui-protocol`` package's types), for AG-UI front ends (CopilotKit and others).

**In.** The input's ``threadId`` is the team's thread: a session of the user's, made on first use
(a thread of another user's is not found). The last user message is a chat
:class:`~teamgraph.server.turns.Start` — the request, or, while the thread's run waits for an
answer, the answer. ``resume`` entries answer the interrupts a run finished with: the clarifying
question (``payload``: the answer) and tool approvals (``payload``: ``{action:
approve|reject|edit, comment?, args?}``; ``cancelled``: rejected) — a
:class:`~teamgraph.server.turns.Resume`.

**Out.** One teamgraph run execution is one AG-UI run: ``RUN_STARTED``; the plan as a
``STATE_SNAPSHOT`` (``{plan: {name, tier, steps: [{id, worker, task, status}]}}``) and each step's
progress as ``STEP_STARTED``/``STEP_FINISHED`` with a ``STATE_DELTA`` (JSON Patch) of its status;
tool calls as ``TOOL_CALL_START``/``ARGS``/``END`` and ``TOOL_CALL_RESULT``; the answer as one
assistant text message (``TEXT_MESSAGE_START``/``CONTENT``/``END``, token by token where one
agent writes it); then ``RUN_FINISHED`` — with the shared state in a last snapshot, the run's
token usage, and the outcome ``success``, ``cancelled`` or ``interrupt`` (a clarifying question,
or tool calls waiting for approval, each an :class:`~ag_ui.core.Interrupt`) — or ``RUN_ERROR``.
Each event is written as AG-UI's encoder writes it (camelCase, unset fields left out).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
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
from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.errors import RunConflict, UsageError
from teamgraph.events import Event
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import Intent, Opened, Resume, Start, open_turn, waiting_in
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/agui", tags=["AG-UI"])
log = logging.getLogger(__name__)
_THREAD = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
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


def agui_frame(event: BaseEvent) -> str:
    """An AG-UI event as AG-UI's own encoder writes it (its models leave unset fields out),
    through the one framer."""
    return frame(None, event.model_dump_json(by_alias=True))


# --- in ------------------------------------------------------------------------------------------
@router.post("/{team}", response_class=StreamingResponse)
async def run_agent(
    team: str, body: RunAgentInput, user: CurrentUser, state: State, db: Db
) -> StreamingResponse:
    if team not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no team named {team!r}")
    session = await _thread(db, user.id, team, body.thread_id)
    await db.close()  # give the request's connection back: a whole run needs the pool
    intent = (
        await _resume(state, session, body.resume)
        if body.resume
        else Start(_request(body), chat=True)
    )
    opened = await open_turn(state, intent, session, team)
    return AguiEvents(state, opened, body.thread_id, body.run_id).response()


def _request(body: RunAgentInput) -> str:
    for message in reversed(body.messages):
        if message.role == "user":
            content: Any = message.content
            text = content if isinstance(content, str) else _text_parts(content)
            if text.strip():
                return text
    raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail="no user message with text")


def _text_parts(parts: Sequence[Any]) -> str:
    return "".join(getattr(p, "text", "") or "" for p in parts if getattr(p, "type", "") == "text")


async def _thread(db: AsyncSession, user_id: str, team: str, thread_id: str) -> SessionRow:
    """The user's session for ``thread_id`` (made on first use, on ``team``)."""
    if not _THREAD.fullmatch(thread_id):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail="threadId: 1-64 letters, digits or . _ : -",
        )
    row = await repo.claimed_session(db, thread_id)
    if row is None:
        return await repo.create_session(db, user_id, session_id=thread_id, team=team)
    if row.user_id != user_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Thread not found")
    if row.team != team:
        raise HTTPException(
            status.HTTP_409_CONFLICT, detail=f"thread {thread_id} runs team {row.team!r}"
        )
    return row


async def _resume(state: AppState, session: SessionRow, entries: list[ResumeEntry]) -> Intent:
    """The answers to the interrupts the thread's paused run finished with."""
    waiting = await waiting_in(state, session.id)
    if waiting is None:
        raise RunConflict("the thread has no paused run")
    answer: str | None = None
    decisions: dict[str, dict[str, Any]] = {}
    for entry in entries:
        payload = entry.payload
        if entry.interrupt_id == clarification_id(waiting.run.id):
            answer = payload if isinstance(payload, str) else str((payload or {}).get("answer", ""))
        elif entry.status == "cancelled":
            decisions[entry.interrupt_id] = {"action": "reject", "comment": "cancelled"}
        elif isinstance(payload, dict):
            decisions[entry.interrupt_id] = payload
        else:
            raise UsageError(f"resume {entry.interrupt_id}: payload must be a decision object")
    return Resume(waiting.run.id, answer, decisions or None)


# --- out -----------------------------------------------------------------------------------------
class AguiEvents(EventStream[BaseEvent]):
    """Folds one execution's teamgraph events into AG-UI events, in order (``thread_id``,
    ``run_id``: the client's ids for this AG-UI run)."""

    def __init__(self, state: AppState, turn: Opened, thread_id: str, run_id: str) -> None:
        super().__init__(state, turn)
        self.thread_id, self.run_id = thread_id, run_id
        pattern = state.teams[turn.team].spec.pattern if turn.team else ""
        self.reply = ChatReply(pattern, separate=True)
        self.steps: list[str] = []
        self.message_id: str | None = None
        self.question = ""
        self.approvals: list[Mapping[str, Any]] = list(
            turn.waiting
        )  # {id, agent, tool, args, call_id}
        self.state_at_end: dict[str, Any] | None = None

    async def on_start(self) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)

    def on_event(self, event: Event) -> Iterable[BaseEvent]:
        out = self._translated(event)
        kind, text = self.reply.piece(event)
        if kind == "answer" and text and event.type != "clarification_requested":
            out += self._text(text)
        return out

    async def on_end(self) -> AsyncIterator[BaseEvent]:
        """The run's end: its last state, and how it finished (or failed)."""
        result = await self.result()
        for out in self._close_text():
            yield out
        if self.state_at_end is not None:
            yield StateSnapshotEvent(snapshot={"shared_state": self.state_at_end})
        if result.status == "failed":
            yield RunErrorEvent(message=result.error or "the run failed", code="run_failed")
            return
        usage = result.usage
        used = TokenUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
        )
        outcome: Any = RunFinishedSuccessOutcome()
        if result.status == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        elif self.question or self.approvals:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts())
        yield RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, usage=[used]
        )

    def on_error(self, error: Exception) -> Iterable[BaseEvent]:
        """The stream has begun: the protocol's way to fail is ``RUN_ERROR``."""
        log.error("AG-UI stream of run %s failed", self.turn.run_id, exc_info=error)
        return [RunErrorEvent(message=f"{type(error).__name__}: {error}", code="internal_error")]

    def encode(self, event: BaseEvent) -> str:
        return agui_frame(event)

    def _translated(self, event: Event) -> list[BaseEvent]:
        if event.type in ("plan_created", "step_started", "step_completed", "step_failed"):
            return self._plan(event)
        if event.type in ("tool_called", "tool_returned"):
            return [*self._close_text(), *self._tool(event)]
        if event.type == "clarification_requested":
            self.question = event.question
        elif event.type == "approval_requested":
            asked = {"id": event.request_id, "agent": event.agent, "tool": event.tool}
            self.approvals.append({**asked, "args": event.args, "call_id": event.call_id})
        elif event.type == "run_completed":
            self.state_at_end = event.shared_state
        return []

    def _plan(self, event: Event) -> list[BaseEvent]:
        """The plan as state, and each step's progress as a step and a delta of its status."""
        if event.type == "plan_created":
            self.steps = [s["id"] for s in event.steps]
            steps = [
                {"id": s["id"], "worker": s["worker"], "task": s["task"], "status": "pending"}
                for s in event.steps
            ]
            plan = {"name": event.plan_name, "tier": event.tier, "steps": steps}
            return [StateSnapshotEvent(snapshot={"plan": plan})]
        if event.type == "step_started" and event.step_id in self.steps:
            return [
                StepStartedEvent(step_name=event.step_id),
                self._status(event.step_id, "running"),
            ]
        if event.type in ("step_completed", "step_failed") and event.step_id in self.steps:
            done = "done" if event.type == "step_completed" else "failed"
            return [self._status(event.step_id, done), StepFinishedEvent(step_name=event.step_id)]
        return []

    def _tool(self, event: Event) -> list[BaseEvent]:
        if event.type == "tool_called":
            call = event.call_id or uuid.uuid4().hex
            return [
                ToolCallStartEvent(tool_call_id=call, tool_call_name=event.tool),
                ToolCallArgsEvent(tool_call_id=call, delta=json.dumps(event.args)),
                ToolCallEndEvent(tool_call_id=call),
            ]
        if event.type == "tool_returned":
            return [
                ToolCallResultEvent(
                    message_id=uuid.uuid4().hex,
                    tool_call_id=event.call_id,
                    content=event.output,
                    role="tool",
                )
            ]
        return []

    def _interrupts(self) -> list[Interrupt]:
        found = []
        if self.question:
            found.append(
                Interrupt(
                    id=clarification_id(self.turn.run_id),
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

    def _status(self, step_id: str, step_status: str) -> StateDeltaEvent:
        index = self.steps.index(step_id)
        patch = [{"op": "replace", "path": f"/plan/steps/{index}/status", "value": step_status}]
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
