"""The API of swarm-ai-chat's client (``ginobefun/swarm-ai-chat``): its chat (``/api/chat``, the
AI SDK data stream with an orchestrator result per turn) and its sessions (``/api/sessions``).
Its own sign-in (better-auth's ``/api/auth/*``) is not served: the log-in cookie stands in."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, model_validator
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.events import Event
from teamgraph.result import RunResult, StepResult
from teamgraph.server import repositories as repo
from teamgraph.server.compat.derived_teams import filtered_team, single_team
from teamgraph.server.deps import CurrentUser, Db, ManagingUser, OwnedSession, State
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply
from teamgraph.server.schemas import ChatMessage, SafeText
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, Start, Turn, open_turn, remember_pause
from teamgraph.status import FINISHED, StepState
from teamgraph.storage.models import MessageRow, RunRow, SessionRow, TurnResultRow, UserRow

# --- chat --------------------------------------------------------------------------------------
# ``POST /api/chat`` — swarm-ai-chat's chat: one agent or the whole team, with clarification,
# agent preferences and an orchestrator result per turn, in the AI SDK data stream format.
#
# A message is a chat :class:`~teamgraph.server.turns.Start` (``confirmedIntent``: the answer to
# the session's paused question, else part of a new request). The stream is the AI SDK's data
# stream protocol (one ``<code>:<JSON>`` part per line, not server-sent events): ``f:`` (the
# message starts), ``0:`` text parts as the run goes (progress lines, then the answer as it is
# written), the ``2:`` orchestrator part (multi), then ``e:`` and ``d:`` with the finish reason
# and the run's token usage.
chat_router = APIRouter(tags=["swarm-ai-chat"])
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


@chat_router.post("/api/chat", response_class=StreamingResponse)
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


# --- orchestrator ------------------------------------------------------------------------------
# A turn as swarm-ai-chat's orchestrator object: the ``tasks`` / ``events`` / ``results`` /
# ``summary`` its workspace panel draws, in that client's vocabulary.
TASK_STATUS: dict[StepState, str] = {
    "pending": "pending",
    "waiting": "in_progress",
    "running": "in_progress",
    "done": "completed",
    "failed": "failed",
    "skipped": "failed",
}
TITLE_CHARS = 60
SUMMARY_CHARS = 280


def orchestrator_result(turn: Turn) -> dict[str, Any]:
    """The orchestrator data part of one ``/api/chat`` turn (``turnIndex`` is set by the
    caller once the turn is stored)."""
    result = turn.result
    gist = summary(turn)
    return {
        "type": "orchestrator",
        "success": result.status in FINISHED,
        "turnIndex": 0,
        "shouldClarify": bool(turn.question),
        "clarificationQuestion": turn.question or None,
        "summary": gist,
        "events": _events(turn, gist),
        "tasks": _tasks(result),
        "results": [
            {
                "taskId": s.id,
                "agentId": s.worker,
                "content": s.output or s.error,
                "status": s.status,
            }
            for s in result.steps
        ],
        "costUSD": result.usage.cost_usd,
    }


def _tasks(result: RunResult) -> list[dict[str, Any]]:
    planned = {s.id: s.depends_on for s in result.plan.steps} if result.plan else {}
    needed = {dep for deps in planned.values() for dep in deps}
    return [
        {
            "id": s.id,
            "title": title(s.task),
            "description": s.task,
            "assignedTo": s.worker,
            "status": TASK_STATUS[s.status],
            # a step others wait for is on the critical path
            "priority": "high" if s.id in needed else "medium",
            "dependencies": planned.get(s.id, []),
            **({"result": s.output} if s.output else {}),
            **({"error": s.error or "skipped: a step it depends on failed"} if _bad(s) else {}),
        }
        for s in result.steps
    ]


def _bad(step: StepResult) -> bool:
    return step.status in ("failed", "skipped")


def title(task: str) -> str:
    """The task's first sentence, cut at a word within :data:`TITLE_CHARS`."""
    first = re.split(r"(?<=[.!?。！？])\s*|\n", task.strip(), maxsplit=1)[0].rstrip(".。")
    if len(first) <= TITLE_CHARS:
        return first
    head = first[:TITLE_CHARS]
    if " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


def summary(turn: Turn) -> str:
    """What the turn did and the gist of its answer — never the whole answer again."""
    result = turn.result
    if turn.question:
        return f"Waiting for your answer: {turn.question}"
    if turn.paused:
        return "Waiting for a decision: " + _lead(turn.answer)
    if result.status not in FINISHED:
        return f"The run ended ({result.status}): {_lead(result.error)}"
    steps = result.steps
    agents = sorted({s.worker for s in steps})
    done = sum(s.status == "done" for s in steps)
    counted = f"{done} of {len(steps)} tasks completed by {', '.join(agents)}. " if steps else ""
    return counted + _lead(result.output)


def _lead(text: str) -> str:
    """The first paragraph of prose (headings and list markers dropped), cut at a sentence
    or a word within :data:`SUMMARY_CHARS`."""
    lines = [ln.strip().lstrip("#>*-• ").strip() for ln in text.splitlines()]
    prose = " ".join(ln for ln in lines if ln and not ln.startswith(("|", "```")))
    if len(prose) <= SUMMARY_CHARS:
        return prose
    head = prose[:SUMMARY_CHARS]
    sentence = max(head.rfind(". "), head.rfind("。"))
    if sentence > SUMMARY_CHARS // 2:
        return head[: sentence + 1]
    return head.rsplit(" ", 1)[0] + "…"


def _events(turn: Turn, gist: str) -> list[dict[str, Any]]:
    """The turn's run events as the client's ``GraphEvent`` list (``tasks_created``,
    ``task_start``, ``agent_reply``, ``task_done``, ``ask_user``, ``summary``,
    ``flow_cancelled``, ``system``); events the panel has no use for (tokens, usage, …) are
    left out."""
    out: list[dict[str, Any]] = []
    for event in turn.events:
        for n, (kind, content, agent, task) in enumerate(_event_described(event, gist)):
            item: dict[str, Any] = {
                "id": f"{turn.run_id}:{event.seq}" + (f".{n}" if n else ""),
                "type": kind,
                "timestamp": event.ts.isoformat(),
                "content": content,
            }
            if agent:
                item["agentId"] = agent
            if task:
                item["taskId"] = task
            out.append(item)
    return out


Described = tuple[str, str, str, str]  # (client type, content, agent, task)


def _event_described(event: Event, gist: str) -> list[Described]:
    if event.type.startswith("step_"):
        return _step(event)
    match event.type:
        case "plan_created":
            listed = "; ".join(f"{s['id']} → {s['worker']}" for s in event.steps)
            return [("tasks_created", f"{len(event.steps)} tasks ({event.tier}): {listed}", "", "")]
        case "handoff" if event.from_agent != event.to_agent:
            return [("system", f"{event.from_agent} → {event.to_agent}", event.to_agent, "")]
        case "clarification_requested":
            return [("ask_user", event.question, "", "")]
        case "approval_requested":
            waits = f"{event.tool} waits for approval"
            return [("system", waits, event.agent, event.step_id or "")]
        case "run_completed":
            return [("summary", gist, "", "")]
        case "run_failed":
            return [("system", f"The run failed: {event.error}", "", "")]
        case "run_cancelled":
            return [("flow_cancelled", event.reason or "cancelled", "", "")]
    return []


def _step(event: Event) -> list[Described]:
    match event.type:
        case "step_started":
            return [("task_start", event.task, event.worker, event.step_id)]
        case "step_completed":
            done = f"{event.step_id} done in {event.elapsed_s:.1f} s"
            return [
                ("agent_reply", event.output, event.worker, event.step_id),
                ("task_done", done, event.worker, event.step_id),
            ]
        case "step_failed":
            failed = f"{event.step_id} failed: {event.error}"
            return [("system", failed, event.worker, event.step_id)]
    return []


# --- sessions ----------------------------------------------------------------------------------
# swarm-ai-chat's session routes (``/api/sessions``), as its client calls them: list (with
# ``search``), create from agent ids, update, delete, and a session's messages — each wrapped in
# ``{"success": true, "data": …}`` and owner-scoped (another user's session is a 404).
sessions_router = APIRouter(prefix="/api/sessions", tags=["swarm-ai-chat"])


class SessionIn(BaseModel):
    """The client's camelCase fields; ``team`` (teamgraph's) picks the team outright."""

    title: SafeText | None = Field(default=None, max_length=200)
    agentIds: list[SafeText] = Field(default_factory=list, max_length=50)
    primaryAgentId: SafeText | None = Field(default=None, max_length=200)
    team: SafeText | None = Field(default=None, max_length=200)


class SessionUpdate(BaseModel):
    """What can change; the client's other fields (participants, counts, …) are ignored."""

    title: SafeText | None = Field(default=None, max_length=200)
    primaryAgentId: SafeText | None = Field(default=None, max_length=200)


@sessions_router.get("")
async def list_sessions(
    user: ManagingUser,
    state: State,
    db: Db,
    search: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    rows = await repo.list_sessions(db, user.id)
    if search:
        rows = [r for r in rows if search.lower() in (r.name or "").lower()]
    data = await _sessions_described(state, db, user, rows)
    return {"success": True, "data": data, "count": len(data)}


@sessions_router.post("", status_code=status.HTTP_201_CREATED)
async def create_session(
    body: SessionIn, user: ManagingUser, state: State, db: Db
) -> dict[str, Any]:
    """A session on ``team``, else on the served team that has every agent in ``agentIds``
    (422 naming them when none has)."""
    team = body.team or _team_with(state, body.agentIds)
    if team not in _served(state):
        raise _unprocessable(f"Unknown team {team!r}; teams: {', '.join(_served(state))}")
    primary = body.primaryAgentId or (body.agentIds[0] if len(body.agentIds) == 1 else None)
    _check_member(state, team, primary)
    row = await repo.create_session(
        db, user.id, name=body.title or "New Session", team=team, primary_agent=primary
    )
    return {"success": True, "data": (await _sessions_described(state, db, user, [row]))[0]}


@sessions_router.patch("/{session_id}")
async def update_session(
    body: SessionUpdate, session: OwnedSession, user: CurrentUser, state: State, db: Db
) -> dict[str, Any]:
    _check_member(state, session.team, body.primaryAgentId)
    if body.title:
        await repo.rename_session(db, session, body.title)
    if body.primaryAgentId:
        session.primary_agent = body.primaryAgentId
        await db.commit()
    return {"success": True, "data": (await _sessions_described(state, db, user, [session]))[0]}


@sessions_router.delete("/{session_id}")
async def delete_session(session: OwnedSession, db: Db) -> dict[str, Any]:
    await repo.delete_session(db, session)
    return {"success": True, "message": "Session deleted successfully"}


@sessions_router.get("/{session_id}/messages")
async def session_messages(
    session: OwnedSession,
    state: State,
    db: Db,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
    before: datetime | None = None,
    after: datetime | None = None,
) -> dict[str, Any]:
    """Oldest first; each run's tokens and cost are on its last assistant message."""
    rows, total = await repo.messages_page(db, session.id, limit, offset, before, after)
    run_ids = {r.run_id for r in rows if r.run_id}
    billed = await repo.billed_messages(db, state.backend.runs, session.id, run_ids)
    data = [_message(session, r, billed.get(r.id)) for r in rows]
    more = offset + limit < total
    return {
        "success": True,
        "data": data,
        "pagination": {"limit": limit, "offset": offset, "total": total, "hasMore": more},
    }


def _message(session: SessionRow, row: MessageRow, run: RunRow | None) -> dict[str, Any]:
    user = row.role == "user"
    return {
        "id": str(row.id),
        "sessionId": session.id,
        "senderType": "user" if user else "agent" if row.role == "assistant" else "system",
        "senderId": session.user_id if user else session.team,
        "content": row.content,
        "contentType": "text",
        "status": "sent",
        "metadata": {"runId": row.run_id} if row.run_id else {},
        "tokenCount": (run.input_tokens + run.output_tokens) if run else 0,
        "processingTime": _elapsed(run),
        "cost": run.cost_usd if run else 0.0,
        "createdAt": row.created_at.isoformat(),
    }


def _elapsed(run: RunRow | None) -> float:
    if run is None or run.finished_at is None:
        return 0.0
    return round((run.finished_at - run.created_at).total_seconds() * 1000)


async def _sessions_described(
    state: AppState, db: AsyncSession, user: UserRow, rows: list[SessionRow]
) -> list[dict[str, Any]]:
    totals = await repo.session_totals(db, state.backend.runs, [r.id for r in rows])
    return [_session(state, user, r, totals[r.id]) for r in rows]


def _session(
    state: AppState, user: UserRow, row: SessionRow, totals: repo.SessionTotals
) -> dict[str, Any]:
    team = state.teams.get(row.team)
    members = [(m.name, m.description) for m in team.spec.members] if team else []
    agents = {name: _agent(name, text) for name, text in members}
    owner = {"id": user.id, "username": user.email.split("@")[0], "avatarUrl": None}
    pattern = team.spec.pattern if team else ""
    kind = "DIRECT" if row.primary_agent or len(members) == 1 else "GROUP"
    return {
        "id": row.id,
        "title": row.name or "New Session",
        "description": team.spec.description if team else None,
        "type": "WORKFLOW" if kind == "GROUP" and pattern == "workflow" else kind,
        "status": "ACTIVE",
        "createdById": user.id,
        "primaryAgentId": row.primary_agent,
        "primaryAgent": agents.get(row.primary_agent or ""),
        "team": row.team,
        "isPublic": False,
        "isTemplate": False,
        "isPinned": False,
        "isArchived": False,
        "messageCount": totals.messages,
        "totalCost": totals.cost_usd,
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat(),
        "participants": [
            {"role": "OWNER", "isActive": True, "user": owner, "agent": None},
            *(
                {
                    "role": "ADMIN" if n == row.primary_agent else "PARTICIPANT",
                    "isActive": True,
                    "user": None,
                    "agent": a,
                }
                for n, a in agents.items()
            ),
        ],
    }


def _agent(name: str, description: str) -> dict[str, Any]:
    return {
        "id": name,
        "name": name,
        "description": description,
        "avatar": None,
        "avatarStyle": None,
    }


def _served(state: AppState) -> list[str]:
    """The teams a user may start a session on (not the ones derived per chat)."""
    return [name for name in state.teams if ":" not in name]


def _team_with(state: AppState, agents: list[str]) -> str:
    served = _served(state)
    if not agents:
        return served[0]
    fits = [n for n in served if set(agents) <= {m.name for m in state.teams[n].spec.members}]
    if not fits:
        known = sorted({m.name for n in served for m in state.teams[n].spec.members})
        raise _unprocessable(
            f"No team has every agent of agentIds {agents}; agents: {', '.join(known)}"
        )
    return min(fits, key=lambda n: len(state.teams[n].spec.members))  # the closest fit


def _check_member(state: AppState, team: str, agent: str | None) -> None:
    names = [m.name for m in state.teams[team].spec.members]
    if agent is not None and agent not in names:
        raise _unprocessable(
            f"primaryAgentId {agent!r} is not a member of team {team!r}: {', '.join(names)}"
        )


def _unprocessable(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)


ROUTERS: tuple[APIRouter, ...] = (chat_router, sessions_router)
