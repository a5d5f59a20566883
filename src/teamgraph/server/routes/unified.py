"""``POST /api/chat`` — the seeds' unified chat: single agent or the whole team, with
clarification, agent preferences and an orchestrator result per turn (AI SDK stream format)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, model_validator

from teamgraph.events import Event
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.orchestrator import orchestrator_result
from teamgraph.server.progress import Telling, told
from teamgraph.server.schemas import ChatMessage, SafeText
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Opened,
    Turn,
    filtered_team,
    open_turn,
    remember_pause,
    single_team,
    store_turn,
)
from teamgraph.status import FINISHED
from teamgraph.storage.models import SessionRow

router = APIRouter(tags=["seed-compatible chat"])


class AgentPreferences(BaseModel):
    """The seeds' camelCase field names, kept as they are for their clients."""

    primaryAgent: str | None = None
    excludeAgents: list[str] = Field(default_factory=list)
    includeAgents: list[str] = Field(default_factory=list)


class ChatData(BaseModel):
    sessionId: SafeText
    mode: Literal["auto", "single", "multi"] = "auto"
    confirmedIntent: SafeText | None = Field(default=None, max_length=3000)
    agentPreferences: AgentPreferences = Field(default_factory=AgentPreferences)
    agentId: SafeText | None = Field(default=None, max_length=200)


class UnifiedChat(BaseModel):
    """Both request shapes of the seed's history: ``{messages, data: {sessionId, mode, …}}``,
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


@router.post("/api/chat")
async def unified_chat(
    body: UnifiedChat, user: CurrentUser, state: State, db: Db
) -> StreamingResponse:
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
    opened = await _open(state, session, team, body)
    return StreamingResponse(
        _data_stream(state, session, opened, multi),
        media_type="text/plain",
        headers={**headers, **DATA_STREAM},
    )


async def _open(state: AppState, session: SessionRow, team: str, body: UnifiedChat) -> Opened:
    """The user's message (or the intent they confirmed) as a new run, or as the answer to
    the question the session's run waits on."""
    text = next(
        (m.content for m in reversed(body.messages) if m.role == "user"), body.messages[-1].content
    )
    confirmed = body.data.confirmedIntent
    if confirmed:  # the answer to the paused run's question, else part of a new request
        text = f"{text}\n\nConfirmed intent: {confirmed}"
    return await open_turn(state, session.user_id, session, team, text, answer=confirmed)


DATA_STREAM = {"X-Vercel-AI-Data-Stream": "v1"}  # the AI SDK's data stream protocol


async def _data_stream(
    state: AppState, session: SessionRow, opened: Opened, multi: bool
) -> AsyncIterator[str]:
    """The AI SDK data stream: ``f:`` (the message starts), ``0:`` text parts as the run
    goes (progress lines, then the answer as it is written), the ``2:`` orchestrator part
    (multi), then ``e:`` and ``d:`` with the finish reason and the run's token usage."""
    yield f"f:{json.dumps({'messageId': opened.run_id})}\n"
    telling = Telling(state.teams[opened.team].spec.pattern)
    seen: list[Event] = []
    if opened.notice:
        telling.pause = opened.notice
        yield _text(opened.notice)
    else:
        events = _kept(state.runs.events(opened.run_id, opened.after_seq), seen)
        async for piece in told(events, telling):
            yield _text(piece)
    if telling.pause:
        await remember_pause(state, session.id, telling.pause, opened.run_id)
    result = await state.runs.runner(opened.team).result(opened.run_id)
    turn = Turn(opened.run_id, result, seen, opened.notice)
    if multi:
        data = orchestrator_result(turn)
        data["turnIndex"] = await store_turn(state, session.id, turn.run_id, data)
        yield f"2:{json.dumps([data], ensure_ascii=False)}\n"
    tokens = {
        "promptTokens": result.usage.input_tokens,
        "completionTokens": result.usage.output_tokens,
    }
    ended = turn.paused or result.status in FINISHED
    finish = {"finishReason": "stop" if ended else "error", "usage": tokens}
    yield f"e:{json.dumps({**finish, 'isContinued': False})}\n"
    yield f"d:{json.dumps(finish)}\n"


def _text(piece: str) -> str:
    return f"0:{json.dumps(piece, ensure_ascii=False)}\n"


async def _kept(events: AsyncIterator[Event], seen: list[Event]) -> AsyncIterator[Event]:
    """``events`` passed on, those other than tokens kept in ``seen``."""
    async for event in events:
        if event.type != "token":
            seen.append(event)
        yield event
