"""The API of the FastAPI LangGraph agent template's React app
(``fastapi-langgraph-agent-production-ready-template``): its chat (session tokens, single /
multi / workflow modes, streamed as ``{"content", "done"}`` lines), its approvals page and its
knowledge page. Its accounts and sessions (``/api/v1/auth/…``) are teamgraph's own routes, whose
paths and shapes follow the template's."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
from collections.abc import AsyncIterator, Iterable
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, UploadFile, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.errors import RunConflict
from teamgraph.events import Event
from teamgraph.knowledge import Document
from teamgraph.pauses import Decision
from teamgraph.planning.templates import Template, available, misfit
from teamgraph.runtime.runner import user_collection
from teamgraph.server import repositories as repo
from teamgraph.server.compat.derived_teams import single_team, workflow_team
from teamgraph.server.deps import CurrentSession, CurrentUser, Db, State
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply
from teamgraph.server.schemas import ChatMessage
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Opened,
    Resume,
    Start,
    Turn,
    follow,
    open_turn,
    remember_pause,
    waiting_in,
)
from teamgraph.storage.models import RunRow, SessionRow, utcnow

# --- chat --------------------------------------------------------------------------------------
# The template's chat routes, so its React app works unchanged (session tokens):
# ``/api/v1/chatbot/workflow/chat[/stream]``, ``…/workflow/templates``, ``/api/v1/chatbot/chat
# [/stream]`` and ``/api/v1/chatbot/messages``.
#
# A message is a chat :class:`~teamgraph.server.turns.Start`: it answers the session's paused run,
# or starts a run of the session's team (``mode=single``: its first agent alone; the workflow
# routes: the session's workflow team, with ``?template=`` a plan template that fits it). The
# streams send ``data: {"content", "done"}`` lines: the run as one chat reply
# (:class:`~teamgraph.server.protocols.reply.ChatReply`), then ``{"done": true}``.
chat_router = APIRouter(prefix="/api/v1/chatbot", tags=["FastAPI agent template: chat"])
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


@chat_router.post("/workflow/chat", response_model=ChatResponse)
async def workflow_chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> ChatResponse:
    """Run the workflow team (``?template=`` picks a plan template) on the last user message."""
    team = workflow_team(state, session)
    chosen = _fitting(state, team, template or session.template)
    return _reply(body, await _turn(state, db, session, team, body, chosen))


@chat_router.post("/workflow/chat/stream", response_class=StreamingResponse)
async def workflow_chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, template: str | None = None
) -> StreamingResponse:
    """SSE ``data: {"content", "done"}`` lines; an error ends with ``done`` and its text."""
    team = workflow_team(state, session)
    chosen = _fitting(state, team, template or session.template)
    return await _stream(state, db, session, team, body, chosen)


@chat_router.get("/workflow/templates")
async def workflow_templates(state: State, session: CurrentSession) -> dict[str, object]:
    """The templates that fit the session's workflow team."""
    found = _templates(state, workflow_team(state, session))
    return {"templates": [{"name": t.name, "description": t.description} for t in found.values()]}


def _team_for(state: AppState, session: SessionRow, mode: Mode) -> str:
    return single_team(state, session.team) if mode == "single" else session.team


@chat_router.post("/chat", response_model=ChatResponse)
async def chat(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> ChatResponse:
    """``mode=single``: the session team's first agent alone; ``multi``: the whole team."""
    return _reply(body, await _turn(state, db, session, _team_for(state, session, mode), body))


@chat_router.post("/chat/stream", response_class=StreamingResponse)
async def chat_stream(
    body: ChatRequest, session: CurrentSession, state: State, db: Db, mode: Mode = "multi"
) -> StreamingResponse:
    return await _stream(state, db, session, _team_for(state, session, mode), body)


@chat_router.get("/messages", response_model=ChatResponse)
async def get_messages(session: CurrentSession, db: Db) -> ChatResponse:
    rows = await repo.messages(db, session.id)
    return ChatResponse(
        messages=[
            ChatMessage.model_construct(role=r.role, content=r.content)  # type: ignore[arg-type]
            for r in rows
        ]
    )


@chat_router.delete("/messages")
async def clear_messages(session: CurrentSession, db: Db) -> dict[str, object]:
    return {"message": "Chat history cleared", "deleted": await repo.clear_messages(db, session.id)}


# --- approvals ---------------------------------------------------------------------------------
# ``/api/v1/approvals`` — the template's approvals page: the tool calls a session's paused run
# waits for, decided one by one (session token). Each decision is kept in the run's journal
# (through the runner); when every call of the pause has one, the decisions are a
# :class:`~teamgraph.server.turns.Resume` of the run, which goes on in the background — its answer
# joins the chat history.
approvals_router = APIRouter(prefix="/api/v1/approvals", tags=["FastAPI agent template: approvals"])
SHOWN_VALID_FOR = timedelta(days=7)  # the template's shape has an expiry; ours never expire
Status = Literal["pending", "approved", "rejected"]


class ApprovalAction(BaseModel):
    comment: str | None = Field(default=None, max_length=2000)


class ApprovalOut(BaseModel):
    """A tool call waiting for (or given) a decision, in the template's shape."""

    id: str
    session_id: str
    user_id: str | None
    action_type: str  # the tool
    action_description: str
    action_data: dict[str, Any]  # the tool's arguments
    status: Status
    created_at: datetime
    resolved_at: datetime | None = None
    reviewer_comment: str | None = None
    expires_at: datetime


class ApprovalList(BaseModel):
    requests: list[ApprovalOut]
    total: int


async def _approvals(
    state: AppState, session: SessionRow
) -> tuple[RunRow | None, dict[str, ApprovalOut]]:
    """The session's paused run and its tool calls (by their own request id), each with the
    decision kept so far."""
    waiting = await waiting_in(state, session.id)
    if waiting is None:
        return None, {}
    run, calls = waiting.run, waiting.approvals
    runner = state.runs.runner(run.team_name)
    decided = await runner.kept_decisions(run.id, [c["id"] for c in calls])
    return run, {c["id"]: _approval_shown(run, c, decided.get(c["id"])) for c in calls}


def public_id(request_id: str) -> str:
    """A URL-safe id for a tool call's request id (which holds its step path, slashes
    included: the template's client puts the id in the path as it is)."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


def _approval_shown(
    run: RunRow, call: dict[str, Any], decision: dict[str, Any] | None
) -> ApprovalOut:
    state: Status = "pending"
    if decision is not None:
        state = "rejected" if decision["action"] == "reject" else "approved"
    return ApprovalOut(
        id=public_id(call["id"]),
        session_id=run.session_id or run.thread_id,
        user_id=run.user_id,
        action_type=call["tool"],
        action_description=f"{call['agent']} wants to call {call['tool']}",
        action_data=call["args"],
        status=state,
        created_at=run.updated_at,
        resolved_at=decision.get("at") if decision else None,
        reviewer_comment=decision.get("comment") if decision else None,
        expires_at=run.updated_at + SHOWN_VALID_FOR,
    )


@approvals_router.get("/pending", response_model=ApprovalList)
async def pending(session: CurrentSession, state: State) -> ApprovalList:
    _, shown = await _approvals(state, session)
    waiting = [a for a in shown.values() if a.status == "pending"]
    return ApprovalList(requests=waiting, total=len(waiting))


async def _one(
    state: AppState, session: SessionRow, shown_id: str
) -> tuple[RunRow, str, ApprovalOut]:
    """The run, the tool call's own request id and how it is shown, for an id of the URL."""
    run, shown = await _approvals(state, session)
    found = next(((k, a) for k, a in shown.items() if a.id == shown_id), None)
    if run is None or found is None:  # unknown, decided and resumed, or another session's
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Approval request not found")
    return run, *found


@approvals_router.get("/{request_id}", response_model=ApprovalOut)
async def one(request_id: str, session: CurrentSession, state: State) -> ApprovalOut:
    return (await _one(state, session, request_id))[2]


@approvals_router.post("/{request_id}/approve", response_model=ApprovalOut)
async def approve(
    request_id: str, session: CurrentSession, state: State, body: ApprovalAction | None = None
) -> ApprovalOut:
    return await _decide(state, session, request_id, "approve", body or ApprovalAction())


@approvals_router.post("/{request_id}/reject", response_model=ApprovalOut)
async def reject(
    request_id: str, session: CurrentSession, state: State, body: ApprovalAction | None = None
) -> ApprovalOut:
    return await _decide(state, session, request_id, "reject", body or ApprovalAction())


async def _decide(
    state: AppState,
    session: SessionRow,
    request_id: str,
    action: Literal["approve", "reject"],
    body: ApprovalAction,
) -> ApprovalOut:
    run, call_id, found = await _one(state, session, request_id)
    if found.status != "pending":
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"already {found.status}")
    decision = Decision.approve() if action == "approve" else Decision.reject(body.comment or "")
    runner = state.runs.runner(run.team_name)
    kept = {**decision.model_dump(), "comment": body.comment, "at": utcnow().isoformat()}
    await runner.keep_decision(run.id, call_id, kept)
    _, shown = await _approvals(state, session)
    if all(a.status != "pending" for a in shown.values()):  # decided: the run goes on
        decided = await runner.kept_decisions(run.id, list(shown))
        choices = {
            k: Decision(action=v["action"], comment=v.get("comment") or "")
            for k, v in decided.items()
        }
        with contextlib.suppress(RunConflict):  # another decision resumed it a moment ago
            await open_turn(state, Resume(run.id, decisions=choices))
    return shown[call_id]


# --- knowledge ---------------------------------------------------------------------------------
# ``/api/v1/rag`` — the template's knowledge page: a user's own documents (markdown, text, PDF),
# indexed into that user's collection, which that user's runs search and nobody else's do (a user
# token or a session token).
knowledge_router = APIRouter(prefix="/api/v1/rag", tags=["FastAPI agent template: knowledge"])
KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".pdf": "pdf"}


def _document_shown(doc: Document) -> dict[str, Any]:
    return {
        "doc_id": str(doc.id),
        "filename": doc.name,
        "file_type": KINDS.get(PurePath(doc.name).suffix.lower(), "text"),
        "chunk_count": doc.chunks,
        "created_at": doc.added_at,
        "provider": "",
    }


@knowledge_router.post("/upload")
async def upload(file: UploadFile, user: CurrentUser, state: State) -> dict[str, Any]:
    """Index a markdown, text or PDF file for the user's own runs."""
    name = PurePath(file.filename or "").name
    kind = KINDS.get(PurePath(name).suffix.lower())
    if not name or kind is None:
        supported = ", ".join(sorted(KINDS))
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"Unsupported file type: {name or '(no name)'}. Supported: {supported}",
        )
    data = await file.read()
    if not data:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name} is empty")
    text = await asyncio.to_thread(_text, data, kind, name)
    if not text.strip():
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name}: no text found")
    kb = state.backend.knowledge
    doc = await asyncio.to_thread(
        kb.add_document, user_collection(user.id), name, text, kind == "markdown"
    )
    return {**_document_shown(doc), "file_size": len(data)}


def _text(data: bytes, kind: str, name: str) -> str:
    if kind != "pdf":
        return data.decode("utf-8-sig", errors="replace")
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError) as exc:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, detail=f"{name}: not a readable PDF ({exc})"
        ) from None


@knowledge_router.get("/documents")
async def documents(user: CurrentUser, state: State) -> dict[str, Any]:
    docs = await asyncio.to_thread(state.backend.knowledge.documents, user_collection(user.id))
    return {"documents": [_document_shown(d) for d in docs], "total": len(docs)}


def _doc_id(doc_id: str) -> int:
    if not (doc_id.isascii() and doc_id.isdigit()):  # "¹".isdigit(), but int("¹") fails
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    return int(doc_id)


@knowledge_router.get("/documents/{doc_id}/chunks")
async def chunks(doc_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    kb = state.backend.knowledge
    found = await asyncio.to_thread(kb.chunks, user_collection(user.id), _doc_id(doc_id))
    if found is None:  # unknown, or another user's: never says which
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    shown = [
        {"chunk_index": i, "heading": c.heading, "content": c.text} for i, c in enumerate(found)
    ]
    return {"doc_id": doc_id, "chunks": shown, "total": len(shown)}


@knowledge_router.delete("/documents/{doc_id}")
async def delete(doc_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    kb = state.backend.knowledge
    if not await asyncio.to_thread(kb.delete, user_collection(user.id), _doc_id(doc_id)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Document not found")
    return {"doc_id": doc_id, "deleted": True}


ROUTERS: tuple[APIRouter, ...] = (chat_router, approvals_router, knowledge_router)
