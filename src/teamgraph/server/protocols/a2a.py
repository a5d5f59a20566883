"""Teams as A2A agents: for each served team, an agent card at
``/a2a/{team}/.well-known/agent-card.json`` and the JSON-RPC endpoint it names, ``/a2a/{team}``
— served by the official ``a2a-sdk``'s server (``pip install 'teamgraph[a2a]'``), which speaks
A2A 1.0 (``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``, …) and, on the
same endpoint, 0.3 (``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``).

A message starts a task: a run of the team in the conversation its ``contextId`` names (one
session per caller and context: the team remembers earlier tasks of the context). The run's
progress lines are ``working`` status updates, its answer the task's ``answer`` artifact
(streamed in chunks where the model writes it). A run that pauses leaves the task
``input-required`` with the question, or the tool calls waiting for approval, as the status
message; a message with the same ``taskId`` (and ``contextId``) answers the question, or decides
the calls with ``approve`` / ``reject`` (a reason may follow a colon). ``tasks/cancel`` cancels
the run.

Requests authenticate with a bearer token or an API key (read by
:mod:`teamgraph.server.credentials`), the card's included; a task is its caller's alone. The
SDK keeps tasks in memory: a task is known to the process that ran it, until it restarts (the
runs and their sessions stay in the database).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, status
from sqlalchemy.exc import IntegrityError
from starlette.authentication import SimpleUser
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from teamgraph.errors import RunConflict
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, State
from teamgraph.server.protocols.reply import ChatReply, chat_intent
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, open_turn, result_of, waiting_in, waiting_notice
from teamgraph.status import FINISHED, PAUSED
from teamgraph.storage.models import SessionRow

if TYPE_CHECKING:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.types import AgentCard

PREFIX = "/a2a"
CARD = "/.well-known/agent-card.json"
ANSWER = "answer"  # the artifact that holds a task's answer


@contextlib.asynccontextmanager
async def _serving(app: FastAPI) -> AsyncIterator[None]:
    """One JSON-RPC dispatcher per team, made at its first request, closed with the app."""
    app.state.a2a = {}
    try:
        yield
    finally:
        for handler, _ in app.state.a2a.values():
            await handler.aclose()


router = APIRouter(tags=["A2A"], lifespan=_serving)


@router.get(PREFIX + "/{team}" + CARD)
async def agent_card(team: str, request: Request, user: CurrentUser, state: State) -> Any:
    """The team's agent card (A2A 1.0, with the 0.3 fields beside)."""
    if team not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"No team {team!r} is served")
    try:
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict
    except ImportError:
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, detail=_MISSING) from None
    return agent_card_to_dict(_card(state, team, _base(request)))


_MISSING = "A2A is not installed on this server: pip install 'teamgraph[a2a]'"


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


class Endpoint:
    """``POST /a2a/{team}``: the credential checked (401 otherwise), then the SDK's
    JSON-RPC dispatcher of the team, the caller as the SDK's user (the owner of its tasks)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state: AppState = request.app.state.teamgraph
        team = request.path_params["team"]
        user_id = await state.authenticator.caller(scope)
        if user_id is None:
            detail = "Not authenticated: send a bearer token or an API key (x-api-key)"
            response = JSONResponse({"detail": detail}, 401, {"WWW-Authenticate": "Bearer"})
        elif team not in state.teams:
            response = JSONResponse({"detail": f"No team {team!r} is served"}, 404)
        else:
            scope["user"] = SimpleUser(user_id)
            try:
                dispatcher = _dispatcher(request.app, state, team, _base(request))
            except ImportError:
                response = JSONResponse({"detail": _MISSING}, 501)
            else:
                response = await dispatcher.handle_requests(request)
        await response(scope, receive, send)


router.routes.append(Route(PREFIX + "/{team}", Endpoint(), methods=["POST"]))


def _dispatcher(app: FastAPI, state: AppState, team: str, base: str) -> Any:
    """The team's JSON-RPC dispatcher (made once per app and team)."""
    made = app.state.a2a.get(team)
    if made is None:
        from a2a.server.request_handlers import DefaultRequestHandler
        from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
        from a2a.server.tasks import InMemoryTaskStore

        handler = DefaultRequestHandler(
            agent_executor=_executor(state, team),
            task_store=InMemoryTaskStore(),  # tasks by owner: the caller's SimpleUser
            agent_card=_card(state, team, base),
        )
        made = app.state.a2a[team] = (handler, JsonRpcDispatcher(handler, None, True))
    return made[1]


def _card(state: AppState, team: str, base: str) -> AgentCard:
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        APIKeySecurityScheme,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
    )

    spec = state.teams[team].spec
    bearer = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
    key = SecurityScheme(
        api_key_security_scheme=APIKeySecurityScheme(location="header", name="x-api-key")
    )
    url = f"{base}{PREFIX}/{team}"
    return AgentCard(
        name=team,
        description=spec.description or f"The {team} team",
        version="0.1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={"bearer": bearer, "apiKey": key},
        security_requirements=[
            SecurityRequirement(schemes={"bearer": _no_scopes()}),
            SecurityRequirement(schemes={"apiKey": _no_scopes()}),
        ],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "text/markdown"],
        skills=[
            AgentSkill(
                id=team,
                name=team,
                description=spec.description or f"Ask the {team} team",
                tags=[spec.pattern, "teamgraph"],
            )
        ],
    )


def _no_scopes() -> Any:
    from a2a.types import StringList

    return StringList()


# --- the agent: a task is a run of the team -------------------------------------------------
def _executor(state: AppState, team: str) -> AgentExecutor:
    from a2a.server.agent_execution import AgentExecutor

    class TeamExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await _Task(state, team, context, event_queue).execute()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await _Task(state, team, context, event_queue).cancel()

    return TeamExecutor()


class _Task:
    """One message to the team's agent: the run it starts or resumes, as task updates."""

    def __init__(
        self, state: AppState, team: str, context: RequestContext, queue: EventQueue
    ) -> None:
        from a2a.server.tasks import TaskUpdater

        self.state, self.team, self.context, self.queue = state, team, context, queue
        assert context.task_id is not None and context.context_id is not None
        self.updater = TaskUpdater(queue, context.task_id, context.context_id)
        self.user_id = context.call_context.user.user_name

    async def execute(self) -> None:
        from a2a.helpers import new_task
        from a2a.types import TaskState

        text = self.context.get_user_input().replace("\x00", "")
        if self.context.current_task is None:
            history = [self.context.message] if self.context.message else []
            task = new_task(
                self.updater.task_id, self.updater.context_id, TaskState.TASK_STATE_SUBMITTED
            )
            task.history.extend(history)
            await self.queue.enqueue_event(task)
        if not text.strip():
            await self.updater.requires_input(self._message("Say what to ask the team."))
            return
        session = await self._session()
        intent = await chat_intent(self.state, session, text)
        opened = await open_turn(self.state, intent, session, self.team)
        about = {"teamgraph": {"run_id": opened.run_id, "session_id": session.id}}
        await self.updater.update_status(TaskState.TASK_STATE_WORKING, metadata=about)
        if opened.notice:  # waits for decisions and the message states none
            await self.updater.requires_input(self._message(_how(opened.notice, True)))
            return
        await self._follow(opened, session)

    async def _follow(self, opened: Opened, session: SessionRow) -> None:
        from a2a.helpers import new_text_part
        from a2a.types import TaskState

        reply = ChatReply(self.state.teams[self.team].spec.pattern, separate=True)
        chunks = 0
        async for event in self.state.runs.events(opened.run_id, opened.after_seq):
            kind, text = reply.piece(event)
            if text and kind == "progress":
                working = TaskState.TASK_STATE_WORKING
                await self.updater.update_status(working, self._message(text.strip()))
            elif text and event.type != "clarification_requested":
                await self.updater.add_artifact(
                    [new_text_part(text)], ANSWER, ANSWER, append=chunks > 0
                )
                chunks += 1
        result = await result_of(self.state, opened)
        if result.status in PAUSED:
            waiting = await waiting_in(self.state, session.id)
            asks = waiting is None or waiting.asks
            said = reply.pause or (waiting_notice(waiting.approvals) if waiting else "")
            await self.updater.requires_input(self._message(_how(said, not asks)))
            return
        rest = reply.closing()
        await self.updater.add_artifact(
            [new_text_part(rest)], ANSWER, ANSWER, append=chunks > 0, last_chunk=True
        )
        if result.status in FINISHED:
            await self.updater.complete()
        elif result.status == "cancelled":
            await self.updater.cancel()
        else:
            await self.updater.failed(self._message(result.error or result.status))

    async def cancel(self) -> None:
        """Cancel the task's run (running or paused), then the task."""
        session = await self._session()
        row = await self.state.backend.runs.latest_in_session(session.id)
        if row is not None:
            with contextlib.suppress(RunConflict):  # it ended already
                await self.state.runs.cancel(row.id)
        await self.updater.cancel()

    async def _session(self) -> SessionRow:
        """The caller's session of this context (made at its first task)."""
        key = f"a2a|{self.user_id}|{self.team}|{self.updater.context_id}"
        session_id = hashlib.sha256(key.encode()).hexdigest()[:32]
        async with self.state.sessions() as db:
            found = await repo.owned_session(db, self.user_id, session_id)
            if found is not None:
                return found
            try:
                return await repo.create_session(
                    db, self.user_id, session_id, team=self.team, name="A2A"
                )
            except IntegrityError:  # made by a message of the same context just now
                await db.rollback()
                made = await repo.owned_session(db, self.user_id, session_id)
                assert made is not None
                return made

    def _message(self, text: str) -> Any:
        return self.updater.new_agent_message([_text(text)])


def _text(text: str) -> Any:
    from a2a.helpers import new_text_part

    return new_text_part(text)


def _how(said: str, approvals: bool) -> str:
    """A pause's status message: what the run waits for and how to go on."""
    if approvals:
        said = said.split(" Approve or reject it on the Approvals page")[0]
        how = 'reply "approve" or "reject" (a reason may follow a colon: "reject: not now")'
    else:
        how = "reply with your answer"
    return f"{said}\n\n(To continue this task, send a message with its taskId: {how}.)"
