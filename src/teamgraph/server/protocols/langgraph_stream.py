"""The Agent Protocol's stream parts: one execution's events as the parts of the asked stream
modes (see :mod:`.agent_protocol`), each with an id of its own for ``Last-Event-ID``
reconnects."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import HTTPException, status

from teamgraph.errors import UsageError
from teamgraph.events import Event
from teamgraph.server.protocols import langgraph_threads as threads
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.langgraph_state import message
from teamgraph.server.protocols.reply import ChatReply, progress_line
from teamgraph.server.protocols.runs import MAX_SEQ
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened

MODES = ("values", "updates", "messages", "messages-tuple", "events", "custom", "debug")
Part = tuple[str, Any, str | None]  # (mode, data, id)


class StreamParts(EventStream[Part]):
    """Folds one execution's events into stream parts of the asked modes. Each part has an id
    of its own, ``<seq>:<n>``: the ``n``-th part written after the event ``seq`` (the parts
    the run's end adds count on from its last event's), so a reconnect with ``Last-Event-ID``
    (:func:`parse_last_event_id`, ``skip``) resumes at the very next part. A rejoined stream
    gets no metadata and no first state again."""

    def __init__(
        self,
        state: AppState,
        turn: Opened,
        thread_id: str,
        modes: set[str],
        skip: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(state, turn)
        self.thread_id, self.modes, self.skip = thread_id, set(modes), skip
        if "messages-tuple" in self.modes:
            self.modes.add("messages")
        pattern = state.teams[turn.team].spec.pattern if turn.team in state.teams else ""
        self.reply = ChatReply(pattern, separate=True)
        self.last = turn.after_seq  # the seq of the last event seen
        self._written = 0  # parts numbered after it

    async def on_start(self) -> AsyncIterator[Part]:
        if self.skip is not None:
            return
        yield "metadata", {"run_id": self.turn.run_id, "attempt": 1}, None
        if "values" in self.modes:
            yield "values", await threads.values_by_id(self.state, self.thread_id), None

    def on_event(self, event: Event) -> Iterable[Part]:
        self.last, self._written = event.seq, 0
        return self._numbered(self._parts(event))

    async def on_end(self) -> AsyncIterator[Part]:
        values = await threads.values_by_id(self.state, self.thread_id)
        ending: list[tuple[str, Any]] = []
        if values.get("__interrupt__") and "updates" in self.modes:
            ending.append(("updates", {"__interrupt__": values["__interrupt__"]}))
        if "values" in self.modes:
            ending.append(("values", values))
        for part in self._numbered(ending):
            yield part

    def _numbered(self, parts: Iterable[tuple[str, Any]]) -> list[Part]:
        """``parts`` with their ids, but those the reconnecting client had."""
        out: list[Part] = []
        for mode, data in parts:
            n, self._written = self._written, self._written + 1
            if self.skip is None or self.skip < (self.last, n):
                out.append((mode, data, f"{self.last}:{n}"))
        return out

    def encode(self, part: Part) -> str:
        mode, data, part_id = part
        return frame(mode, json.dumps(data, ensure_ascii=False), part_id)

    def _parts(self, event: Event) -> Iterable[tuple[str, Any]]:
        if "events" in self.modes:
            yield "events", {"event": event.type, "data": event.model_dump(mode="json")}
        if "custom" in self.modes and (line := progress_line(event)):
            yield "custom", line
        if "updates" in self.modes and (update := _update(event)):
            yield "updates", update
        kind, text = self.reply.piece(event)  # every event: the reply keeps its state
        answers = kind == "answer" and text and event.type != "clarification_requested"
        if answers and "messages" in self.modes:
            chunk = {"type": "AIMessageChunk", "content": text, "id": f"run-{self.turn.run_id}"}
            yield "messages", [chunk, {"langgraph_node": event.path[-1] if event.path else ""}]


def _update(event: Event) -> dict[str, Any] | None:
    if event.type == "step_completed":
        return {event.step_id: {"output": event.output, "worker": event.worker}}
    if event.type == "step_failed":
        return {event.step_id: {"error": event.error, "worker": event.worker}}
    if event.type == "agent_message" and len(event.path) == 2:
        return {event.agent: {"messages": [message("assistant", event.content, event.agent)]}}
    return None


def modes(asked: str | list[str]) -> set[str]:
    modes = {asked} if isinstance(asked, str) else set(asked)
    unknown = modes - set(MODES)
    if unknown:
        raise UsageError(f"stream_mode: {sorted(unknown)} not supported; use {', '.join(MODES)}")
    return modes


def parse_last_event_id(value: str | None) -> tuple[int, int] | None:
    """``Last-Event-ID`` as (seq, part): ``<seq>:<n>`` — a part's id — is after that part;
    a bare ``<seq>`` is after all of event ``seq``'s parts (``n`` = -1: nothing of ``seq``
    is written again). ``None`` when absent."""
    if value is None or not value.strip():
        return None
    seq, _, part = value.strip().partition(":")
    digits = seq.isascii() and seq.isdigit() and (not part or (part.isascii() and part.isdigit()))
    if not digits or len(seq) > 12 or int(seq) > MAX_SEQ:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail=f"Last-Event-ID: {value[:40]!r} is not a stream part id (<seq>:<n>)",
        )
    return int(seq), int(part) if part else -1
