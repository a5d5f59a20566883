"""Routes of the seeds' FastAPI service, so their clients work unchanged:
``/api/v1/chatbot/workflow/...`` and ``/api/v1/chatbot/chat`` (session tokens)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter
from sqlalchemy.ext.asyncio import AsyncSession
from sse_starlette.sse import EventSourceResponse

from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentSession, Db, State
from teamgraph.server.schemas import ChatMessage, ChatRequest, ChatResponse
from teamgraph.server.state import AppState
from teamgraph.server.turns import Turn, run_turn, single_team, workflow_team
from teamgraph.status import FINISHED, PAUSED
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/api/v1/chatbot", tags=["seed-compatible chat"])
Mode = Literal["single", "multi"]
CHUNK = 200


def _last_user(body: ChatRequest) -> str:
    return next(
        (m.content for m in reversed(body.messages) if m.role == "user"), body.messages[-1].content
    )


async def _turn(
    state: AppState,
    db: AsyncSession,
    session: SessionRow,
    team: str,
    body: ChatRequest,
    template: str | None = None,
) -> Turn:
    await db.close()  # give the request's connection back: a whole run needs the pool
    return await run_turn(state, session.user_id, session, team, _last_user(body), template)


def _reply(body: ChatRequest, turn: Turn) -> ChatResponse:
    answer = ChatMessage.model_construct(role="assistant", content=turn.answer)
    return ChatResponse(messages=[*body.messages, answer])


def _chunks(turn: Turn) -> AsyncIterator[str]:
    async def generate() -> AsyncIterator[str]:
        failed = turn.result.status not in FINISHED | PAUSED
        if not failed:
            text = turn.answer
            for start in range(0, len(text), CHUNK):
                yield json.dumps({"content": text[start : start + CHUNK], "done": False})
            yield json.dumps({"content": "", "done": True})
        else:
            yield json.dumps({"content": turn.answer, "done": True})

    return generate()


@router.post("/workflow/chat", response_model=ChatResponse)
async def workflow_chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> ChatResponse:
    """Run the workflow team (``?template=`` picks a plan template) on the last user message."""
    team = workflow_team(state, session)
    return _reply(body, await _turn(state, db, session, team, body, template or session.template))


@router.post("/workflow/chat/stream")
async def workflow_chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> EventSourceResponse:
    """SSE ``data: {"content", "done"}`` lines; an error ends with ``done`` and its text."""
    team = workflow_team(state, session)
    turn = await _turn(state, db, session, team, body, template or session.template)
    return EventSourceResponse(_chunks(turn))


@router.get("/workflow/templates")
async def workflow_templates(state: State, _session: CurrentSession) -> dict[str, object]:
    found = load_templates([BUILTIN_TEMPLATES_DIR, *state.settings.templates_dirs])
    return {"templates": [{"name": t.name, "description": t.description} for t in found.values()]}


def _team_for(state: AppState, session: SessionRow, mode: Mode) -> str:
    return single_team(state, session.team) if mode == "single" else session.team


@router.post("/chat", response_model=ChatResponse)
async def chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> ChatResponse:
    """``mode=single``: the session team's first agent alone; ``multi``: the whole team."""
    return _reply(body, await _turn(state, db, session, _team_for(state, session, mode), body))


@router.post("/chat/stream")
async def chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> EventSourceResponse:
    turn = await _turn(state, db, session, _team_for(state, session, mode), body)
    return EventSourceResponse(_chunks(turn))


@router.get("/messages", response_model=ChatResponse)
async def get_messages(session: CurrentSession, db: Db) -> ChatResponse:
    rows = await repo.messages(db, session.id)
    return ChatResponse(
        messages=[
            ChatMessage.model_construct(role=r.role, content=r.content)  # type: ignore[arg-type]
            for r in rows
        ]
    )


@router.delete("/messages")
async def clear_messages(session: CurrentSession, db: Db) -> dict[str, object]:
    return {"message": "Chat history cleared", "deleted": await repo.clear_messages(db, session.id)}
