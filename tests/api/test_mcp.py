"""Teams as MCP tools, driven by the official ``mcp`` client (``ClientSession`` over streamable
HTTP) against the server served by uvicorn: the tools, a call's progress and answer, a pause
answered through elicitation or by a follow-up call with the run id, and the credential."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import make_user, serving
from .test_openai_compat import login, new_key

# the client that takes headers works on every mcp release the project supports (>= 1.20)
pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")
Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


@pytest.fixture
def key(server: str) -> str:
    return str(new_key(server, login(server, "mcp@example.com"))["key"])


@asynccontextmanager
async def connect(
    base: str, headers: dict[str, str], elicit: Elicit | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        streamablehttp_client(f"{base}/mcp", headers=headers) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_each_team_is_a_tool_whose_call_streams_progress_and_answers(
    server: str, key: str
) -> None:
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with connect(server, {"x-api-key": key}) as mcp:
        tools = (await mcp.list_tools()).tools
        names = [t.name for t in tools]
        assert "research" in names and "notebook" in names and names == sorted(names)
        [research] = [t for t in tools if t.name == "research"]
        assert research.inputSchema["required"] == ["request"]
        assert research.inputSchema["properties"]["request"]["type"] == "string"
        result = await mcp.call_tool(
            "research", {"request": "How Redis persists data"}, progress_callback=on_progress
        )
    assert not result.isError and "append-only file" in text_of(result)
    assert (result.structuredContent or {})["status"] == "completed"
    assert progress and progress[0].startswith("> Plan") and any("▶" in p for p in progress)


async def test_a_bearer_token_works_and_no_credential_is_a_401(server: str, key: str) -> None:
    token = login(server, "mcp@example.com")
    bearer = {"Authorization": f"Bearer {token}"}
    async with (
        streamablehttp_client(f"{server}/mcp", headers=bearer) as (read, write, session_id),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        assert (await mcp.list_tools()).tools
        opened = session_id()
        assert opened
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        cookie = {"Cookie": f"teamgraph_token={token}"}
        other = new_key(server, login(server, "mallory@example.com"))["key"]
        async with httpx.AsyncClient(base_url=server) as http:
            for headers in (
                {},
                {"x-api-key": "tg-not-a-key"},
                {"Authorization": "Bearer x"},
                cookie,
            ):
                denied = await http.post("/mcp", json=hello, headers={**accept, **headers})
                assert denied.status_code == 401
                assert denied.headers["WWW-Authenticate"] == "Bearer"
            theirs = {**accept, "x-api-key": other, "mcp-session-id": opened}
            stolen = await http.post("/mcp", json=hello, headers=theirs)
            assert stolen.status_code == 404  # a session answers its own user only
            mine = await http.post("/mcp", json=hello, headers={**theirs, "x-api-key": key})
            assert mine.status_code == 200  # the same user's other credential: its session


async def test_a_question_is_asked_by_elicitation_and_the_answer_goes_on(
    server: str, key: str
) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "How Redis persists data"})

    async with connect(server, {"x-api-key": key}, answer) as mcp:
        result = await mcp.call_tool("notebook", {"request": "help"})
    assert "Could you say more" in asked[0]
    assert not result.isError and "append-only file" in text_of(result)


@pytest.mark.parametrize(
    ("decision", "outcome"), [("approve", "saved note"), ("reject", "rejected")]
)
async def test_an_approval_is_asked_by_elicitation(
    server: str, key: str, decision: str, outcome: str
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def decide(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": decision})

    async with connect(server, {"x-api-key": key}, decide) as mcp:
        result = await mcp.call_tool("notebook", {"request": "Save a note: Redis keeps data"})
    [params] = asked
    assert params.message.startswith("Waiting for your approval: save_note(")
    assert outcome in text_of(result)


async def test_without_elicitation_a_pause_says_how_to_continue_and_a_call_does(
    server: str, key: str
) -> None:
    async with connect(server, {"x-api-key": key}) as mcp:
        paused = await mcp.call_tool("notebook", {"request": "help"})
        about = paused.structuredContent or {}
        run_id = about["run_id"]
        assert about["status"] == "paused" and "Could you say more" in about["question"]
        assert f'"run_id": "{run_id}"' in text_of(paused)
        answered = await mcp.call_tool(
            "notebook", {"request": "How Redis persists data", "run_id": run_id}
        )
        assert "append-only file" in text_of(answered)
        again = await mcp.call_tool("notebook", {"request": "more", "run_id": run_id})
        assert again.isError and "not paused" in text_of(again)
        saving = await mcp.call_tool("notebook", {"request": "Save a note: Redis keeps data"})
        waiting = (saving.structuredContent or {})["run_id"]
        assert "approve" in text_of(saving) and saving.structuredContent
        vague = await mcp.call_tool("notebook", {"request": "hmm", "run_id": waiting})
        assert vague.isError and "approve" in text_of(vague)
        rejected = await mcp.call_tool("notebook", {"request": "reject: no", "run_id": waiting})
        assert "rejected" in text_of(rejected)
    other = new_key(server, login(server, "mallory@example.com"))["key"]
    async with connect(server, {"x-api-key": other}) as theirs:
        stolen = await theirs.call_tool("notebook", {"request": "x", "run_id": run_id})
    assert stolen.isError and "No run" in text_of(stolen)


async def test_without_the_sdk_mcp_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, api_settings: Settings
) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.streamable_http_manager", None)
    app = create_app(api_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        alice = await make_user(client, "alice@example.com")
        answered = await client.post("/mcp", json={}, headers=alice.headers)
        assert answered.status_code == 501 and "teamgraph[mcp]" in answered.json()["detail"]


def test_the_docs_client_example_runs(
    server: str, key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    [code] = re.findall(r"```python client\n(.*?)```", doc, re.DOTALL)
    monkeypatch.setenv("TEAMGRAPH_URL", server)
    monkeypatch.setenv("TEAMGRAPH_API_KEY", key)
    exec(compile(code, "docs/mcp.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "'research'" in printed and "progress: > Plan" in printed
    assert "append-only file" in printed
