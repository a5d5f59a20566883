"""``POST /api/chat`` — swarm-ai-chat's chat: one agent or the whole team, with clarification,
agent preferences and an orchestrator result per turn, in the AI SDK data stream format.

A message is a chat :class:`~teamgraph.server.turns.Start` (``confirmedIntent``: the answer to
the session's paused question, else part of a new request). The stream is the AI SDK's data
stream protocol (one ``<code>:<JSON>`` part per line, not server-sent events): ``f:`` (the
message starts), ``0:`` text parts as the run goes (progress lines, then the answer as it is
written), the ``2:`` orchestrator part (multi), then ``e:`` and ``d:`` with the finish reason and
the run's token usage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, model_validator
from sqlalchemy import func, select

from teamgraph.events import Event
from teamgraph.server import repositories as repo
from teamgraph.server.compat.derived_teams import filtered_team, single_team
from teamgraph.server.compat.swarm_chat.orchestrator import orchestrator_result
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply
from teamgraph.server.schemas import ChatMessage, SafeText
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, Start, Turn, open_turn, remember_pause
from teamgraph.status import FINISHED
from teamgraph.storage.models import SessionRow, TurnResultRow

router = APIRouter(tags=["swarm-ai-chat"])
DATA_STREAM = {"X-Vercel-AI-Data-Stream": "v1"}  # the AI SDK's data stream protocol
Part = tuple[str, Any]  # (type code, JSON value)
ASCII_PARTS = frozenset("fed")  # parts written in ASCII JSON (the others keep their text as is)


class AgentPreferences(BaseModel):
    """The client's camelCase field names, kept as they are."""

    primaryAgent: str | None = None
    excludeAgents: list[str] = Field(default_factory=list)
    includeAgents: list[str] = Field(default_factory=list)


class ChatData(BaseModel):
    sessionId: SafeText
    mode: Literal["auto", "single", "multi"] = "auto"
    confirmedIntent: SafeText | None = Field(default=None, max_length=3000)
    agentPreferences: AgentPreferences = Field(default_factory=AgentPreferences)
    agentId: SafeText | None = Field(default=None, max_length=200)


class SwarmChat(BaseModel):
    """Both request shapes of the client's history: ``{messages, data: {sessionId, mode, …}}``,
    and ``{messages, sessionId, userId, agentId}`` as its ``ChatArea`` sends them (``userId``
    is never trusted: the token says who asks; an ``agentId`` that names a member of the
    session's team makes a single chat with it — the client sends its default agent's id
    when the session has none, and then the whole team answers)."""

    messages: list[ChatMessage] = Field(min_length=1)
    data: ChatData

    @model_validator(mode="before")
    @classmethod
    def _top_level_shape(cls, raw: Any) -> Any:
        if not isinstance(raw, dict) or "data" in raw or "sessionId" not in raw:
            return raw
        data = {"sessionId": raw["sessionId"], "agentId": raw.get("agentId")}
        return {"messages": raw.get("messages"), "data": data}

    def intent(self) -> Start:
        """The user's message (or the intent they confirmed) as a chat message."""
        text = next(
            (m.content for m in reversed(self.messages) if m.role == "user"),
            self.messages[-1].content,
        )
        confirmed = self.data.confirmedIntent
        if confirmed:  # the answer to the paused run's question, else part of a new request
            text = f"{text}\n\nConfirmed intent: {confirmed}"
        return Start(text, chat=True, answer=confirmed)


class DataStream(EventStream[Part]):
    """The turn as the AI SDK data stream; in multi mode its orchestrator result is stored
    (numbered within the session) and sent."""

    media_type = "text/plain"

    def __init__(self, state: AppState, turn: Opened, session: SessionRow, multi: bool) -> None:
        super().__init__(state, turn)
        self.session, self.multi = session, multi
        self.reply = ChatReply(state.teams[turn.team or session.team].spec.pattern)
        self.seen: list[Event] = []  # the turn's events but its tokens (the orchestrator's)

    async def on_start(self) -> AsyncIterator[Part]:
        yield "f", {"messageId": self.turn.run_id}
        if self.turn.notice:
            self.reply.pause = self.turn.notice
            yield "0", self.turn.notice

    def on_event(self, event: Event) -> Iterable[Part]:
        if event.type != "token":
            self.seen.append(event)
        return [("0", piece) for piece in self.reply.chunks(event)]

    async def on_end(self) -> AsyncIterator[Part]:
        if not self.turn.notice and (rest := self.reply.closing()):
            yield "0", rest
        if self.reply.pause:
            await remember_pause(self.state, self.session.id, self.reply.pause, self.turn.run_id)
        result = await self.result()
        turn = Turn(self.turn.run_id, result, self.seen, self.turn.notice)
        if self.multi:
            data = orchestrator_result(turn)
            data["turnIndex"] = await _store_turn(self.state, self.session.id, turn.run_id, data)
            yield "2", [data]
        tokens = {
            "promptTokens": result.usage.input_tokens,
            "completionTokens": result.usage.output_tokens,
        }
        ended = turn.paused or result.status in FINISHED
        finish = {"finishReason": "stop" if ended else "error", "usage": tokens}
        yield "e", {**finish, "isContinued": False}
        yield "d", finish

    def encode(self, part: Part) -> str:
        code, value = part
        return f"{code}:{json.dumps(value, ensure_ascii=code in ASCII_PARTS)}\n"


@router.post("/api/chat", response_class=StreamingResponse)
async def swarm_chat(body: SwarmChat, user: CurrentUser, state: State, db: Db) -> StreamingResponse:
    """One turn as the AI SDK data stream, sent as it happens. The run starts (or resumes)
    before the response does, so a conflict is an HTTP error, not a broken stream."""
    session = await repo.owned_session(db, user.id, body.data.sessionId)
    if session is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Session not found")
    await db.close()  # give the connection back: a whole run needs the pool
    members = [m.name for m in state.teams[session.team].spec.members]
    prefs = body.data.agentPreferences
    mode = body.data.mode
    if body.data.agentId in members:
        mode, prefs.primaryAgent = "single", body.data.agentId
    multi = mode == "multi" or (mode == "auto" and len(members) > 1)
    if multi:
        team = filtered_team(state, session.team, prefs.includeAgents, prefs.excludeAgents)
        count = str(len(state.teams[team].spec.members))
        headers = {"X-Chat-Mode": "multi", "X-Agent-Count": count}
    else:
        team = single_team(state, session.team, prefs.primaryAgent)
        headers = {"X-Chat-Mode": "single", "X-Agent-Id": state.teams[team].spec.members[0].name}
    opened = await open_turn(state, body.intent(), session, team)
    return DataStream(state, opened, session, multi).response({**headers, **DATA_STREAM})


async def _store_turn(state: AppState, session_id: str, run_id: str, data: dict[str, Any]) -> int:
    """Number the turn within its session and keep its orchestrator result."""
    async with state.sessions() as db:
        last = await db.scalar(
            select(func.max(TurnResultRow.turn_index)).where(TurnResultRow.session_id == session_id)
        )
        index = int(last or 0) + 1
        db.add(
            TurnResultRow(
                session_id=session_id,
                turn_index=index,
                run_id=run_id,
                data=json.loads(json.dumps({**data, "turnIndex": index})),
            )
        )
        await db.commit()
    return index
