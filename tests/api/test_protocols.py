"""The protocol seam: every dialect's stream is framed by the one framer and built by the one
response helper, and a new dialect is one adapter — a route that parses its request into an
intent and an event stream that translates the run's events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from teamgraph.events import Event
from teamgraph.runtime.team_api import Team
from teamgraph.server.deps import ReadSession, state_of
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import Start, open_turn
from teamgraph.testing import FunctionChatModel

from .conftest import User, make_session

# the characters JSON leaves raw that line readers (str.splitlines, httpx) break lines at
ANSWER = "first\u2028second\u2029third\x85end"


def serve_echo(app: FastAPI) -> str:
    """A one-agent team whose answer holds every character a line reader breaks at."""
    state: AppState = app.state.teamgraph
    echo = {"name": "echo", "description": "says one thing"}
    spec = {"name": "echo", "pattern": "single", "members": [echo]}
    model = FunctionChatModel(fn=lambda messages: ANSWER)
    state.teams["echo"] = Team.from_dict(spec, settings=state.settings, model=model)
    return "echo"


def sse_data(text: str) -> list[Any]:
    """The JSON of every ``data:`` line of a stream, read line by line as ``str.splitlines``
    reads (every line must be a field of a frame, or the blank line that ends one)."""
    found = []
    for line in text.splitlines():
        field, _, value = line.partition(": ")
        assert line == "" or field in ("id", "event", "data"), repr(line)
        if field == "data" and value != "[DONE]":
            found.append(json.loads(value))
    return found


def strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


async def streamed(client: httpx.AsyncClient, method: str, url: str, **options: Any) -> str:
    """A stream read to its end, checked for the headers every streamed response has."""
    async with client.stream(method, url, **options) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["content-type"].startswith("text/event-stream")
        return "".join([chunk async for chunk in response.aiter_text()])


async def test_every_dialect_frames_its_stream_one_line_per_field(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    team = serve_echo(app)
    auth = alice.headers
    session = await make_session(client, alice, team=team)
    sid = session["session_id"]
    session_auth = {"Authorization": f"Bearer {session['token']['access_token']}"}
    run = await client.post(f"/api/v1/sessions/{sid}/runs", json={"input": "hi"}, headers=auth)
    events = f"/api/v1/runs/{run.json()['run_id']}/events"
    runs_api = await streamed(client, "GET", events, headers=auth)
    chat = {"model": team, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    openai = await streamed(client, "POST", "/v1/chat/completions", json=chat, headers=auth)
    agui_input = {
        "threadId": "t-echo",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    agui = await streamed(client, "POST", f"/agui/{team}", json=agui_input, headers=auth)
    thread = (await client.post("/langgraph/threads", json={}, headers=auth)).json()["thread_id"]
    lg_run = {
        "assistant_id": team,
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "stream_mode": ["messages-tuple", "values"],
    }
    url = f"/langgraph/threads/{thread}/runs/stream"
    agent_protocol = await streamed(client, "POST", url, json=lg_run, headers=auth)
    message = {"messages": [{"role": "user", "content": "hi"}]}
    template_chat = await streamed(
        client, "POST", "/api/v1/chatbot/chat/stream", json=message, headers=session_auth
    )
    for name, text in [
        ("runs", runs_api),
        ("openai", openai),
        ("agui", agui),
        ("agent protocol", agent_protocol),
        ("template chat", template_chat),
    ]:
        said = [s for data in sse_data(text) for s in strings(data)]
        assert any(ANSWER in s for s in said), (name, text)


async def test_the_data_stream_dialect_goes_through_the_same_response_helper(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    """swarm-ai-chat reads the AI SDK's data stream (lines of ``<code>:<JSON>``, not SSE)."""
    sid = (await make_session(client, alice, team=serve_echo(app)))["session_id"]
    body = {"messages": [{"role": "user", "content": "hi"}], "sessionId": sid}
    response = await client.post("/api/chat", json=body, headers=alice.headers)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["content-type"].startswith("text/plain")
    parts = [line.split(":", 1) for line in response.text.split("\n") if line]
    assert parts[0][0] == "f" and parts[-1][0] == "d"
    assert "".join(json.loads(v) for c, v in parts if c == "0").endswith(ANSWER)


# --- a new dialect is one adapter ---------------------------------------------------------------
class Said(BaseModel):
    text: str


class StepLines(EventStream[str]):
    """A made-up dialect: one ``data:`` line per event type, then the run's status."""

    async def on_start(self) -> AsyncIterator[str]:
        yield "begin"

    def on_event(self, event: Event) -> Iterable[str]:
        return (event.type,)

    async def on_end(self) -> AsyncIterator[str]:
        yield (await self.result()).status

    def encode(self, item: str) -> str:
        return frame("line", json.dumps(item))


tiny = APIRouter()


@tiny.post("/tiny/{session_id}")
async def tiny_route(session: ReadSession, body: Said, request: Request) -> StreamingResponse:
    state = state_of(request)
    opened = await open_turn(state, Start(body.text), session, session.team)
    return StepLines(state, opened).response()


async def test_a_new_dialect_is_one_adapter_on_the_seam(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    app.include_router(tiny)
    sid = (await make_session(client, alice, team=serve_echo(app)))["session_id"]
    body = {"text": "hi"}
    text = await streamed(client, "POST", f"/tiny/{sid}", json=body, headers=alice.headers)
    lines = sse_data(text)
    assert lines[0] == "begin" and lines[1] == "run_started"
    assert lines[-2:] == ["run_completed", "completed"]
    again = await client.post(f"/tiny/{sid}", json={"text": "hi"})
    assert again.status_code == 401  # the seam's credential reader guards it like every route
