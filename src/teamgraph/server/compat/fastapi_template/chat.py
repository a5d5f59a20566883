"""The template's chat routes, so its React app works unchanged (session tokens):
``/api/v1/chatbot/workflow/chat[/stream]``, ``…/workflow/templates``, ``/api/v1/chatbot/chat
[/stream]`` and ``/api/v1/chatbot/messages``.

A message is a chat :class:`~teamgraph.server.turns.Start`: it answers the session's paused run,
or starts a run of the session's team (``mode=single``: its first agent alone; the workflow
routes: the session's workflow team, with ``?template=`` a plan template that fits it). The
streams send ``data: {"content", "done"}`` lines: the run as one chat reply
(:class:`~teamgraph.server.protocols.reply.ChatReply`), then ``{"done": true}``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Literal

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.events import Event
from teamgraph.planning.templates import Template, available, misfit
from teamgraph.server import repositories as repo
from teamgraph.server.compat.derived_teams import single_team, workflow_team
from teamgraph.server.deps import CurrentSession, Db, State
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply
from teamgraph.server.schemas import ChatMessage
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, Start, Turn, follow, open_turn, remember_pause
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/api/v1/chatbot", tags=["FastAPI agent template: chat"])
Mode = Literal["single", "multi"]


class ChatRequest(BaseModel):
    messages: list[ChatMessage] = Field(min_length=1)


class ChatResponse(BaseModel):
    messages: list[ChatMessage]


class ChatLines(EventStream[str | None]):
    """The turn as ``{"content", "done"}`` JSON lines: the reply in pieces of at most 200
    characters as the run goes, then what is left to say (the approvals it waits for), then
    ``done`` (the frame ``None``). A question or notice the run paused with joins the session's
    history before ``done`` is sent."""

    def __init__(self, state: AppState, turn: Opened, session: SessionRow) -> None:
        super().__init__(state, turn)
        self.session = session
        self.reply = ChatReply(state.teams[turn.team or session.team].spec.pattern)

    async def on_start(self) -> AsyncIterator[str | None]:
        if self.turn.notice:
            self.reply.pause = self.turn.notice
            yield self.turn.notice

    def on_event(self, event: Event) -> Iterable[str | None]:
        return self.reply.chunks(event)

    async def on_end(self) -> AsyncIterator[str | None]:
        if not self.turn.notice and (rest := self.reply.closing()):
            yield rest
        if self.reply.pause:
            await remember_pause(self.state, self.session.id, self.reply.pause, self.turn.run_id)
        yield None

    def encode(self, piece: str | None) -> str:
        line = (
            {"content": piece, "done": False}
            if piece is not None
            else {"content": "", "done": True}
        )
        return frame(None, json.dumps(line))


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
    message = Start(_last_user(body), template, chat=True)
    turn = await follow(state, await open_turn(state, message, session, team))
    if turn.paused:
        await remember_pause(state, session.id, turn.answer, turn.run_id)
    return turn


def _reply(body: ChatRequest, turn: Turn) -> ChatResponse:
    answer = ChatMessage.model_construct(role="assistant", content=turn.answer)
    return ChatResponse(messages=[*body.messages, answer])


async def _stream(
    state: AppState,
    db: AsyncSession,
    session: SessionRow,
    team: str,
    body: ChatRequest,
    template: str | None = None,
) -> StreamingResponse:
    """The turn as it happens (progress lines, then the answer, then ``done``). The run starts
    before the response does, so a conflict or a bad template is an HTTP error, not a stream."""
    await db.close()  # give the request's connection back: a whole run needs the pool
    message = Start(_last_user(body), template, chat=True)
    opened = await open_turn(state, message, session, team)
    return ChatLines(state, opened, session).response()


def _all_templates(state: AppState, team: str) -> dict[str, Template]:
    """Every plan template ``team`` could name (as its runs load them)."""
    return available(state.settings.templates_dirs, state.teams[team].spec.workflow.templates_dirs)


def _templates(state: AppState, team: str) -> dict[str, Template]:
    """The plan templates that fit ``team`` (every worker they name is a member)."""
    members = [m.name for m in state.teams[team].spec.members]
    return {n: t for n, t in _all_templates(state, team).items() if not misfit(t, members)}


def _fitting(state: AppState, team: str, template: str | None) -> str | None:
    """``template`` when it can plan for ``team``; a 422 saying why not otherwise (never a
    silently different plan)."""
    if template is None:
        return None
    fitting = _templates(state, team)
    if template in fitting:
        return template
    known = _all_templates(state, team)
    members = [m.name for m in state.teams[team].spec.members]
    why = misfit(known[template], members) if template in known else "no such template"
    raise HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        detail=f"template {template!r} cannot plan for team {team!r}: {why}; "
        f"templates for this team: {', '.join(sorted(fitting)) or 'none'}",
    )


@router.post("/workflow/chat", response_model=ChatResponse)
async def workflow_chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> ChatResponse:
    """Run the workflow team (``?template=`` picks a plan template) on the last user message."""
    team = workflow_team(state, session)
    chosen = _fitting(state, team, template or session.template)
    return _reply(body, await _turn(state, db, session, team, body, chosen))


@router.post("/workflow/chat/stream", response_class=StreamingResponse)
async def workflow_chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> StreamingResponse:
    """SSE ``data: {"content", "done"}`` lines; an error ends with ``done`` and its text."""
    team = workflow_team(state, session)
    chosen = _fitting(state, team, template or session.template)
    return await _stream(state, db, session, team, body, chosen)


@router.get("/workflow/templates")
async def workflow_templates(state: State, session: CurrentSession) -> dict[str, object]:
    """The templates that fit the session's workflow team."""
    found = _templates(state, workflow_team(state, session))
    return {"templates": [{"name": t.name, "description": t.description} for t in found.values()]}


def _team_for(state: AppState, session: SessionRow, mode: Mode) -> str:
    return single_team(state, session.team) if mode == "single" else session.team


@router.post("/chat", response_model=ChatResponse)
async def chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> ChatResponse:
    """``mode=single``: the session team's first agent alone; ``multi``: the whole team."""
    return _reply(body, await _turn(state, db, session, _team_for(state, session, mode), body))


@router.post("/chat/stream", response_class=StreamingResponse)
async def chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> StreamingResponse:
    return await _stream(state, db, session, _team_for(state, session, mode), body)


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
