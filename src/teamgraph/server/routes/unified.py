"""``POST /api/chat`` — the seeds' unified chat: single agent or the whole team, with
clarification, agent preferences and an orchestrator result per turn (AI SDK stream format)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
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
    messages: list[ChatMessage] = Field(min_length=1)
    data: ChatData


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
        return StreamingResponse(_text_stream(turn.answer), media_type="text/plain")
    prefs = body.data.agentPreferences
    team = filtered_team(state, session.team, prefs.includeAgents, prefs.excludeAgents)
    turn = await _turn(state, session, team, body)
    result = _orchestrator(turn)
    result["turnIndex"] = await store_turn(state, session.id, turn.run_id, result)
    return StreamingResponse(
        _multi_stream(turn.answer, result),
        media_type="text/plain",
        headers={"X-Chat-Mode": "multi"},
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


async def _text_stream(text: str) -> AsyncIterator[str]:
    for start in range(0, len(text), 200):
        yield f"0:{json.dumps(text[start : start + 200], ensure_ascii=False)}\n"


async def _multi_stream(text: str, result: dict[str, Any]) -> AsyncIterator[str]:
    yield f"0:{json.dumps(text, ensure_ascii=False)}\n"
    yield f"2:{json.dumps([result], ensure_ascii=False)}\n"
