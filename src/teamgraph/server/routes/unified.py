"""``POST /api/chat`` — the seeds' unified chat: single agent or the whole team, with
clarification, agent preferences and an orchestrator result per turn (AI SDK stream format)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, model_validator

from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.progress import ANSWER_CHUNK
from teamgraph.server.schemas import ChatMessage, SafeText
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Turn,
    filtered_team,
    paused_run,
    resume_turn,
    run_turn,
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


class UnifiedChat(BaseModel):
    """Both request shapes of the seed's history: ``{messages, data: {sessionId, mode, …}}``,
    and ``{messages, sessionId, userId, agentId}`` as its ``ChatArea`` sends them (``userId``
    is never trusted: the token says who asks; ``agentId`` picks the agent of a single chat)."""

    messages: list[ChatMessage] = Field(min_length=1)
    data: ChatData

    @model_validator(mode="before")
    @classmethod
    def _top_level_shape(cls, raw: Any) -> Any:
        if not isinstance(raw, dict) or "data" in raw or "sessionId" not in raw:
            return raw
        agent = raw.get("agentId")
        data = {
            "sessionId": raw["sessionId"],
            "mode": "single" if agent else "auto",
            "agentPreferences": {"primaryAgent": agent},
        }
        return {"messages": raw.get("messages"), "data": data}


@router.post("/api/chat")
async def unified_chat(
    body: UnifiedChat, user: CurrentUser, state: State, db: Db
) -> StreamingResponse:
    session = await repo.owned_session(db, user.id, body.data.sessionId)
    if session is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Session not found")
    await db.close()  # give the connection back: a whole run needs the pool
    base = state.teams[session.team]
    multi = body.data.mode == "multi" or (body.data.mode == "auto" and len(base.spec.members) > 1)
    if not multi:
        team = single_team(state, session.team, body.data.agentPreferences.primaryAgent)
        turn = await _turn(state, session, team, body)
        agent = state.teams[team].spec.members[0].name
        return StreamingResponse(
            _data_stream(turn),
            media_type="text/plain",
            headers={"X-Chat-Mode": "single", "X-Agent-Id": agent, **DATA_STREAM},
        )
    prefs = body.data.agentPreferences
    team = filtered_team(state, session.team, prefs.includeAgents, prefs.excludeAgents)
    turn = await _turn(state, session, team, body)
    result = _orchestrator(turn)
    result["turnIndex"] = await store_turn(state, session.id, turn.run_id, result)
    count = str(len(state.teams[team].spec.members))
    return StreamingResponse(
        _data_stream(turn, result),
        media_type="text/plain",
        headers={"X-Chat-Mode": "multi", "X-Agent-Count": count, **DATA_STREAM},
    )


async def _turn(state: AppState, session: SessionRow, team: str, body: UnifiedChat) -> Turn:
    text = next(
        (m.content for m in reversed(body.messages) if m.role == "user"), body.messages[-1].content
    )
    confirmed = body.data.confirmedIntent
    paused = await paused_run(state, session.id) if confirmed else None
    if paused is not None and confirmed:
        return await resume_turn(state, paused.id, paused.team_name, confirmed)
    if confirmed:
        text = f"{text}\n\nConfirmed intent: {confirmed}"
    return await run_turn(state, session.user_id, session, team, text)


def _orchestrator(turn: Turn) -> dict[str, Any]:
    result = turn.result
    steps = result.steps
    return {
        "type": "orchestrator",
        "success": result.status in FINISHED,
        "turnIndex": 0,
        "shouldClarify": bool(turn.question),
        "clarificationQuestion": turn.question or None,
        "summary": result.output,
        "events": [
            {"type": e.type, "seq": e.seq, "path": e.path} for e in turn.events if e.type != "token"
        ],
        "tasks": [
            {"id": s.id, "assignedTo": s.worker, "description": s.task, "status": s.status}
            for s in steps
        ],
        "results": [
            {
                "taskId": s.id,
                "agentId": s.worker,
                "status": s.status,
                "content": s.output or s.error,
            }
            for s in steps
        ],
        "costUSD": result.usage.cost_usd,
    }


DATA_STREAM = {"X-Vercel-AI-Data-Stream": "v1"}  # the AI SDK's data stream protocol


async def _data_stream(turn: Turn, result: dict[str, Any] | None = None) -> AsyncIterator[str]:
    """The AI SDK data stream: ``f:`` (the message starts), ``0:`` text parts, the ``2:``
    orchestrator part (multi), then ``e:`` and ``d:`` with the finish reason and the run's
    token usage."""
    yield f"f:{json.dumps({'messageId': turn.run_id})}\n"
    text = turn.answer
    for start in range(0, len(text), ANSWER_CHUNK):
        yield f"0:{json.dumps(text[start : start + ANSWER_CHUNK], ensure_ascii=False)}\n"
    if result is not None:
        yield f"2:{json.dumps([result], ensure_ascii=False)}\n"
    usage = turn.result.usage
    tokens = {"promptTokens": usage.input_tokens, "completionTokens": usage.output_tokens}
    ended = turn.paused or turn.result.status in FINISHED
    finish = {"finishReason": "stop" if ended else "error", "usage": tokens}
    yield f"e:{json.dumps({**finish, 'isContinued': False})}\n"
    yield f"d:{json.dumps(finish)}\n"
