"""Teams as MCP tools: ``/mcp`` speaks the Model Context Protocol's streamable HTTP transport
(the official ``mcp`` SDK's server, ``pip install 'teamgraph[mcp]'``), so an MCP client
(Claude Desktop, IDE agents, ``mcp.ClientSession``) can call a team as a tool.

Each served team is one tool — its name the team's, its input ``{"request": string}`` (and
``run_id`` to continue a paused run). A call runs the team as the caller: its progress (plan,
steps, handoffs, tool calls) comes as progress notifications while the run goes, when the call
carries a progress token, and the team's answer is the result. A run that pauses asks the client
through elicitation when the client supports it (the question, or approve / reject for tool
calls waiting for approval), and goes on with the reply; otherwise the result is the question
or the notice, with the ``run_id`` to call the tool again with the reply as ``request``.

Requests authenticate with a bearer token or an API key (``Authorization: Bearer …`` or
``x-api-key``), read by :mod:`teamgraph.server.credentials`; anything else is a 401. An MCP
session belongs to the credential that opened it, in the process that opened it (the SDK keeps
sessions in memory: behind several API processes, route a session to one of them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from teamgraph.server import repositories as repo
from teamgraph.server.protocols.reply import ChatReply, decision_in
from teamgraph.server.state import AppState
from teamgraph.server.turns import (
    Answer,
    Intent,
    Opened,
    Resume,
    Start,
    open_turn,
    result_of,
    waiting_notice,
)
from teamgraph.status import FINISHED, PAUSED

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"
INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "request": {"type": "string", "description": "What to ask the team."},
        "run_id": {
            "type": "string",
            "description": "To continue a paused run: its id (from the paused result); "
            "`request` is then the answer to its question, or approve / reject.",
        },
    },
    "required": ["request"],
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your answer."}},
    "required": ["answer"],
}
DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject"]},
        "comment": {"type": "string", "description": "Why (optional)."},
    },
    "required": ["decision"],
}


@contextlib.asynccontextmanager
async def _serving(app: FastAPI) -> AsyncIterator[None]:
    """The SDK's session manager, for as long as the app runs (absent without the SDK)."""
    try:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    except ImportError:
        app.state.mcp = None
        yield
        return
    manager = StreamableHTTPSessionManager(app=_server(), stateless=False)
    ready, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:  # its task group entered and left in one task of its own
        async with manager.run():
            ready.set()
            await stop.wait()

    task = asyncio.create_task(run())
    started = asyncio.create_task(ready.wait())
    await asyncio.wait((task, started), return_when=asyncio.FIRST_COMPLETED)
    if task.done():  # it failed to start: say why
        started.cancel()
        task.result()
    app.state.mcp = manager
    try:
        yield
    finally:
        app.state.mcp = None
        stop.set()
        await task


class Endpoint:
    """``/mcp``: the credential checked (401 otherwise), then the SDK's transport."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = scope["app"]
        manager: StreamableHTTPSessionManager | None = getattr(app.state, "mcp", None)
        if manager is None:
            message = "MCP is not installed on this server: pip install 'teamgraph[mcp]'"
            await JSONResponse({"detail": message}, 501)(scope, receive, send)
            return
        user_id = await app.state.teamgraph.authenticator.caller(scope)
        if user_id is None:
            headers = {"WWW-Authenticate": "Bearer"}
            detail = "Not authenticated: send a bearer token or an API key (x-api-key)"
            await JSONResponse({"detail": detail}, 401, headers)(scope, receive, send)
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        # the SDK binds a session to the user that opened it (another credential: 404)
        token = AccessToken(token="", client_id=user_id, scopes=[])
        scope["user"] = AuthenticatedUser(token)
        await manager.handle_request(scope, receive, send)


router = APIRouter(tags=["MCP"], lifespan=_serving)
router.routes.append(Route(PATH, Endpoint(), methods=["GET", "POST", "DELETE"]))


# --- the MCP server: one tool per team ------------------------------------------------------
def _server() -> Server[Any, Any]:
    from mcp import types
    from mcp.server.lowlevel import Server

    server: Server[Any, Any] = Server("teamgraph")

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        state = _call(server).state
        return [
            types.Tool(name=name, description=team.spec.description, inputSchema=INPUT_SCHEMA)
            for name, team in sorted(state.teams.items())
        ]

    @server.call_tool()  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await _call(server).tool(name, arguments)

    return server


def _call(server: Server[Any, Any]) -> ToolCall:
    ctx = server.request_context
    request = ctx.request
    assert request is not None  # streamable HTTP: the request that carried the message
    token = ctx.meta.progressToken if ctx.meta is not None else None
    user = request.scope["user"].access_token.client_id  # the caller (see Endpoint)
    return ToolCall(request.app.state.teamgraph, user, ctx.session, ctx.request_id, token)


@dataclass
class ToolCall:
    """One ``tools/call`` of a team, for ``user``, on the MCP ``session``."""

    state: AppState
    user_id: str
    session: Any  # mcp.server.session.ServerSession
    request_id: Any
    progress_token: str | int | None
    progressed: int = 0

    async def tool(self, team: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if team not in self.state.teams:
            return _result(f"No team {team!r} is served: tools/list names them.", error=True)
        text = str(arguments.get("request", "")).replace("\x00", "")
        if not text.strip():
            return _result("`request` must say what to ask the team.", error=True)
        run_id = arguments.get("run_id")
        if run_id:
            opened = await self._continue(str(run_id), team, text)
            if isinstance(opened, str):
                return _result(opened, error=True)
        else:
            async with self.state.sessions() as db:
                session = await repo.create_session(db, self.user_id, team=team, name="MCP")
            opened = await open_turn(self.state, Start(text), session, team)
        return await self._follow(opened, team)

    async def _continue(self, run_id: str, team: str, text: str) -> Opened | str:
        """The paused run ``run_id`` of this user on ``team`` resumed with ``text``."""
        row = await self.state.backend.runs.owned(run_id, self.user_id)
        if row is None or row.team_name != team:
            return f"No run {run_id!r} of yours on {team!r}."
        if row.status not in PAUSED:
            return f"Run {run_id} is not paused (it is {row.status})."
        pending = await self.state.runs.runner(team).pending(run_id)
        intent = _reply_to(pending, run_id, text)
        if intent is None:
            return f'Run {run_id} waits for a decision: reply "approve" or "reject".'
        return await open_turn(self.state, intent)

    async def _follow(self, opened: Opened, team: str) -> types.CallToolResult:
        """The run followed to its end — progress notified as it goes — and, while it pauses
        and the client can answer through elicitation, resumed with the answer."""
        while True:
            reply = ChatReply(self.state.teams[team].spec.pattern, separate=True)
            answer = ""
            async for event in self.state.runs.events(opened.run_id, opened.after_seq):
                kind, text = reply.piece(event)
                if text and kind == "progress":
                    await self._progress(text.strip())
                elif text:
                    answer += text
            result = await result_of(self.state, opened)
            if result.status not in PAUSED:
                ended = {"run_id": opened.run_id, "status": result.status}
                failed = result.status not in FINISHED
                return _result(answer + reply.closing(), error=failed, structured=ended)
            pending = await self.state.runs.runner(team).pending(opened.run_id)
            intent = await self._elicit(pending, opened.run_id)
            if intent is None:
                return _paused(pending, opened.run_id, team)
            opened = await open_turn(self.state, intent)

    async def _progress(self, message: str) -> None:
        if self.progress_token is None:
            return
        self.progressed += 1
        await self.session.send_progress_notification(
            self.progress_token,
            self.progressed,
            message=message,
            related_request_id=self.request_id,
        )

    async def _elicit(self, pending: list[dict[str, Any]], run_id: str) -> Intent | None:
        """The client's reply to the pause through elicitation, or ``None`` (it cannot, or
        declined)."""

        params = self.session.client_params
        if params is None or params.capabilities.elicitation is None:
            return None
        question, approvals = _asks(pending)
        if question:
            asked = await self.session.elicit(question, ANSWER_SCHEMA, self.request_id)
            if asked.action != "accept" or not asked.content:
                return None
            return Answer(str(asked.content.get("answer", "")), run_id)
        message = waiting_notice(approvals).split(". Approve or reject")[0] + "."
        decided: types.ElicitResult = await self.session.elicit(
            message, DECISION_SCHEMA, self.request_id
        )
        if decided.action != "accept" or not decided.content:
            return None
        content = decided.content
        decision = {"action": content.get("decision"), "comment": content.get("comment") or ""}
        return Resume(run_id, default=decision)


def _asks(pending: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The question a paused run asks (or ``""``) and the tool calls it waits on."""
    questions = [p["question"] for p in pending if p["type"] == "clarification"]
    return (questions[0] if questions else ""), [p for p in pending if p["type"] == "approval"]


def _reply_to(pending: list[dict[str, Any]], run_id: str, text: str) -> Intent | None:
    """A follow-up call's ``request`` as what the paused run waits for (``None``: it waits
    for decisions and the text states none)."""
    question, _ = _asks(pending)
    if question:
        return Answer(text, run_id)
    decision = decision_in(text)
    return None if decision is None else Resume(run_id, default=decision)


def _paused(pending: list[dict[str, Any]], run_id: str, team: str) -> types.CallToolResult:
    question, approvals = _asks(pending)
    said = question or waiting_notice(approvals)
    reply = (
        "your answer" if question else '"approve" or "reject" (a reason may follow: "reject: …")'
    )
    how = (
        f"(teamgraph: run {run_id} is paused. To continue, call the tool {team!r} again with "
        f'{{"run_id": "{run_id}", "request": {reply}}}.)'
    )
    paused = {"run_id": run_id, "status": "paused", "question": question, "approvals": approvals}
    return _result(f"{said}\n\n{how}", structured=paused)


def _result(
    text: str, error: bool = False, structured: dict[str, Any] | None = None
) -> types.CallToolResult:
    from mcp import types

    content = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, isError=error, structuredContent=structured)
