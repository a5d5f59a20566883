"""teamgraph's events as the LangGraph Agent Protocol's stream parts (what ``langgraph-sdk``
reads from ``…/runs/stream``), per requested ``stream_mode``:

- ``values``: the thread's state, ``{"messages": [...]}`` in LangChain's message form, when the run
  starts and when it ends — with ``__interrupt__`` when it paused;
- ``updates``: ``{<step or agent>: {"output": ...}}`` as each workflow step or agent finishes, and
  ``{"__interrupt__": [...]}`` when the run pauses;
- ``messages`` (``messages-tuple``): the answer's tokens as ``[message chunk, metadata]`` pairs;
- ``events``: every teamgraph event as ``{"event": <type>, "data": <event>}``;
- ``custom``: the run's progress lines (plan, steps, tool calls, handoffs).

An interrupt is ``{"value": ..., "id": ...}``: a clarifying question's value is the question; a
tool approval's is ``{"type": "tool_approval", "tool", "args", "agent"}``. A run resumes with
``Command(resume=...)``: the answer (a string), or decisions — ``{"action": ...}`` for every call,
or ``{<interrupt id>: {"action": ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from teamgraph.events import Event
from teamgraph.server.progress import Telling, progress_line
from teamgraph.server.sse import frame

MODES = ("values", "updates", "messages", "messages-tuple", "events", "custom", "debug")
QUESTION = "clarification"


def message(role: str, content: str, message_id: str) -> dict[str, Any]:
    """A chat message as LangChain serialises it."""
    kind = {"user": "human", "assistant": "ai", "system": "system"}.get(role, role)
    return {"type": kind, "content": content, "id": message_id, "additional_kwargs": {}}


def interrupt_value(pending: dict[str, Any]) -> dict[str, Any]:
    """One of ``Runner.pending``'s items as a LangGraph interrupt."""
    if pending["type"] == "clarification":
        return {"value": pending["question"], "id": f"{pending['interrupt_id']}:{QUESTION}"}
    value = {"type": "tool_approval", "tool": pending["tool"], "args": pending["args"]}
    return {"value": {**value, "agent": pending["agent"]}, "id": pending["id"]}


@dataclass
class Parts:
    """Folds one execution's events into ``(event, data)`` stream parts of the asked modes."""

    modes: set[str]
    pattern: str
    run_id: str
    telling: Telling = field(init=False)
    answer: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.telling = Telling(self.pattern, separate=True)
        if "messages-tuple" in self.modes:
            self.modes.add("messages")

    def of(self, event: Event) -> Iterable[tuple[str, Any]]:
        if "events" in self.modes:
            yield "events", {"event": event.type, "data": event.model_dump(mode="json")}
        if "custom" in self.modes and (line := progress_line(event)):
            yield "custom", line
        if "updates" in self.modes and (update := _update(event)):
            yield "updates", update
        kind, text = self.telling.piece(event)
        if kind == "answer" and text and event.type != "clarification_requested":
            self.answer.append(text)
            if "messages" in self.modes:
                chunk = {"type": "AIMessageChunk", "content": text, "id": f"run-{self.run_id}"}
                yield "messages", [chunk, {"langgraph_node": event.path[-1] if event.path else ""}]


def _update(event: Event) -> dict[str, Any] | None:
    if event.type == "step_completed":
        return {event.step_id: {"output": event.output, "worker": event.worker}}
    if event.type == "step_failed":
        return {event.step_id: {"error": event.error, "worker": event.worker}}
    if event.type == "agent_message" and len(event.path) == 2:
        return {event.agent: {"messages": [message("assistant", event.content, event.agent)]}}
    return None


def sse(event: str, data: Any, event_id: int | None = None) -> str:
    """One server-sent event, as the Agent Protocol frames it."""
    return frame(event, json.dumps(data, ensure_ascii=False), event_id)
