"""A run as one chat reply, for dialects whose clients show a single streamed message (the chat
completions of OpenAI, AG-UI's text message, the Agent Protocol's ``messages`` mode, the
compatibility chats, MCP's tool results): short progress lines as the run goes (plan, steps,
handoffs, tools), then the answer — its tokens as the model writes them where one agent writes
it, else the whole answer when it is ready — or the question or the approval the run waits for;
and a chat message as what the session's run waits for (:func:`chat_intent`): a reply to an
approval notice as the decision it states (:func:`decision_in`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from teamgraph.events import Event
from teamgraph.server.state import AppState
from teamgraph.server.turns import Intent, Resume, Start, waiting_in, waiting_notice
from teamgraph.storage.models import SessionRow

ANSWER_CHUNK = 200
Kind = Literal["progress", "answer"]
WRITERS = {"synthesizer"}  # roles whose tokens are the answer itself
DECISIONS = {"approve": "approve", "approved": "approve", "yes": "approve", "reject": "reject"}
DECISIONS |= {"rejected": "reject", "no": "reject"}


def progress_line(event: Event) -> str | None:
    """One short markdown line for an event a reader would want to see happen, else None."""
    if event.type == "plan_created":
        steps = ", ".join(f"{s['id']} → {s['worker']}" for s in event.steps)
        return f"> Plan ({event.tier}, {len(event.steps)} steps): {steps}\n"
    if event.type == "step_started":
        return f"> ▶ {event.step_id} ({event.worker})\n"
    if event.type == "step_completed":
        return f"> ✓ {event.step_id} ({event.elapsed_s:.1f} s)\n"
    if event.type == "step_failed":
        return f"> ✗ {event.step_id}: {event.error[:200]}\n"
    if event.type == "handoff" and event.from_agent != event.to_agent:
        return f"> {event.from_agent} → {event.to_agent}\n"
    if event.type == "tool_called":
        return f"> {event.agent} calls {event.tool}\n"
    return None


def decision_in(text: str) -> dict[str, str] | None:
    """The decision a chat message states — ``approve`` (``yes``) or ``reject`` (``no``), a
    reason after a colon (``reject: not now``) — else ``None``."""
    word, _, comment = text.strip().partition(":")
    action = DECISIONS.get(word.strip().lower().rstrip(".!"))
    if action is None:
        return None
    return {"action": action, "comment": comment.strip()}


async def chat_intent(state: AppState, session: SessionRow, text: str) -> Intent:
    """The message as a chat :class:`Start` — or, when the session's run waits for decisions
    on tool calls and the message states one (:func:`decision_in`), the :class:`Resume` that
    decides them all."""
    decision = decision_in(text)
    if decision is not None:
        waiting = await waiting_in(state, session.id)
        if waiting is not None and waiting.approvals and not waiting.asks:
            return Resume(waiting.run.id, default=decision)
    return Start(text, chat=True)


@dataclass
class ChatReply:
    """Turns a run's events into chat text as they come (``pattern``: the team's). Each piece
    is progress or answer (:meth:`piece`); ``separate``: the two go to different channels (the
    answer then starts without the blank line that follows progress in one text)."""

    pattern: str
    separate: bool = False
    answered: bool = False  # some of the answer was written
    progressed: bool = False  # some progress was written
    approvals: list[dict[str, Any]] = field(default_factory=list)
    pause: str = ""  # the question or the approval notice, once the run paused
    _progress: bool = False  # whether the last piece was progress

    def piece(self, event: Event) -> tuple[Kind, str]:
        """What ``event`` adds to the reply, and whether it is progress or the answer."""
        text = self.text(event)
        return ("progress" if self._progress else "answer"), text

    def text(self, event: Event) -> str:
        line = progress_line(event)
        self._progress = line is not None
        if line is not None:
            self.progressed = True
            return line
        if event.type == "token" and self._answers(event.agent, len(event.path)):
            first = not self.answered
            self.answered = True
            return ("\n" if first and self._glued else "") + event.text
        if event.type == "model_retry" and self.answered:
            return "\n\n(the model's connection dropped; it answers again)\n\n"
        if event.type == "clarification_requested":
            self.pause = event.question
            return self._after_progress(event.question)
        if event.type == "approval_requested":
            self.approvals.append(event.model_dump())
            return ""
        if event.type == "run_completed" and not self.answered:
            return self._after_progress(event.output)
        if event.type in ("run_failed", "run_cancelled"):
            why = event.error if event.type == "run_failed" else event.reason
            return self._after_progress(f"The run ended ({event.type.removeprefix('run_')}): {why}")
        return ""

    def chunks(self, event: Event) -> Iterator[str]:
        """:meth:`text`, in pieces of at most :data:`ANSWER_CHUNK` characters."""
        text = self.text(event)
        for start in range(0, len(text), ANSWER_CHUNK):
            yield text[start : start + ANSWER_CHUNK]

    def closing(self) -> str:
        """What is left to say once the events end (the approvals the run waits for)."""
        if not self.approvals:
            return ""
        self.pause = waiting_notice(self.approvals)
        return self._after_progress(self.pause)

    def _answers(self, agent: str, depth: int) -> bool:
        """Whether this agent's tokens are the answer: the single pattern's agent, or the
        workflow's model synthesizer (not a nested team's)."""
        if self.pattern == "single":
            return agent not in ("moderator",) and depth == 2
        return agent in WRITERS and depth == 2

    @property
    def _glued(self) -> bool:
        return self.progressed and not self.separate

    def _after_progress(self, text: str) -> str:
        return ("\n" if self._glued else "") + text
