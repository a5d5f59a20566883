"""Teams as A2A agents, driven by the official ``a2a-sdk`` client against the server served by
uvicorn: the agent card, a task streamed and not, a pause as ``input-required`` continued by a
message with the same task, an approval, cancel, the caller's own tasks, and A2A 0.3's methods."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import make_user, serving
from .test_openai_compat import login, new_key


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


@pytest.fixture
def key(server: str) -> str:
    return str(new_key(server, login(server, "a2a@example.com"))["key"])


@asynccontextmanager
async def agent(base: str, team: str, key: str, streaming: bool = True) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"x-api-key": key}, timeout=60) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(f"{base}/a2a/{team}", client_config=config)
        yield client


def ask(text: str, task: Task | None = None) -> SendMessageRequest:
    message = new_text_message(text, role=Role.ROLE_USER)
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return SendMessageRequest(message=message)


async def send(client: Client, text: str, task: Task | None = None) -> list[StreamResponse]:
    return [response async for response in client.send_message(ask(text, task))]


async def final(client: Client, responses: list[StreamResponse]) -> Task:
    """The task as it ended (or paused), read with ``tasks/get``."""
    ids = {r.task.id or r.status_update.task_id or r.artifact_update.task_id for r in responses}
    [task_id] = ids
    return await client.get_task(GetTaskRequest(id=task_id))


def answer_of(task: Task) -> str:
    return "".join(get_artifact_text(a) for a in task.artifacts if a.name == "answer")


async def test_the_agent_card_names_the_endpoint_and_the_credential(server: str, key: str) -> None:
    async with httpx.AsyncClient(base_url=server) as http:
        card = await http.get(
            "/a2a/research/.well-known/agent-card.json", headers={"x-api-key": key}
        )
        assert card.status_code == 200, card.text
        body = card.json()
        assert body["name"] == "research" and body["capabilities"]["streaming"] is True
        urls = {i["url"] for i in body["supportedInterfaces"]}
        assert urls == {f"{server}/a2a/research"} and body["url"] == f"{server}/a2a/research"
        assert set(body["securitySchemes"]) == {"bearer", "apiKey"}
        assert (await http.get("/a2a/research/.well-known/agent-card.json")).status_code == 401
        missing = await http.get(
            "/a2a/nope/.well-known/agent-card.json", headers={"x-api-key": key}
        )
        assert missing.status_code == 404
        ping = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        assert (await http.post("/a2a/research", json=ping)).status_code == 401


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_message_is_a_task_whose_answer_is_an_artifact(
    server: str, key: str, streaming: bool
) -> None:
    async with agent(server, "research", key, streaming) as client:
        responses = await send(client, "How Redis persists data")
        task = await final(client, responses)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert "append-only file" in answer_of(task)
        if not streaming:  # the one response is the task as it ended
            [only] = responses
            assert only.task.status.state == TaskState.TASK_STATE_COMPLETED
            assert "append-only file" in answer_of(only.task)
        else:
            progress = [
                get_message_text(r.status_update.status.message)
                for r in responses
                if r.HasField("status_update")
                and r.status_update.status.state == TaskState.TASK_STATE_WORKING
            ]
            assert any(p.startswith("> Plan") for p in progress)
            chunks = [r for r in responses if r.HasField("artifact_update")]
            assert chunks and chunks[-1].artifact_update.last_chunk


async def test_a_question_is_input_required_and_a_message_to_the_task_answers_it(
    server: str, key: str
) -> None:
    async with agent(server, "notebook", key) as client:
        asked = await final(client, await send(client, "help"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        question = get_message_text(asked.status.message)
        assert "Could you say more" in question and "taskId" in question
        answered = await final(client, await send(client, "How Redis persists data", asked))
        assert answered.id == asked.id and answered.context_id == asked.context_id
        assert answered.status.state == TaskState.TASK_STATE_COMPLETED
        assert "append-only file" in answer_of(answered)


@pytest.mark.parametrize(
    ("reply", "outcome"), [("approve", "saved note"), ("reject: no", "rejected")]
)
async def test_an_approval_is_input_required_and_decided_by_a_message(
    server: str, key: str, reply: str, outcome: str
) -> None:
    async with agent(server, "notebook", key) as client:
        waiting = await final(client, await send(client, "Save a note: Redis keeps data"))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        notice = get_message_text(waiting.status.message)
        assert notice.startswith("Waiting for your approval: save_note(") and '"approve"' in notice
        vague = await final(client, await send(client, "hmm", waiting))
        assert vague.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        decided = await final(client, await send(client, reply, waiting))
        assert decided.status.state == TaskState.TASK_STATE_COMPLETED
        assert outcome in answer_of(decided)


async def test_a_paused_task_is_cancelled_and_tasks_are_their_callers_own(
    server: str, key: str
) -> None:
    async with agent(server, "notebook", key) as client:
        responses = await send(client, "help")
        asked = await final(client, responses)
        [about] = [
            r.status_update.metadata["teamgraph"]
            for r in responses
            if r.status_update.metadata and "teamgraph" in r.status_update.metadata
        ]
        cancelled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    async with httpx.AsyncClient(base_url=server, headers={"x-api-key": key}) as http:
        run = await http.get(f"/api/v1/runs/{about['run_id']}")
    assert run.status_code == 200 and run.json()["status"] == "cancelled", run.text
    other = str(new_key(server, login(server, "mallory@example.com"))["key"])
    async with agent(server, "notebook", other) as theirs:
        with pytest.raises(Exception, match=r"(?i)not found"):
            await theirs.get_task(GetTaskRequest(id=asked.id))


async def test_a2a_0_3_methods_are_served_on_the_same_endpoint(server: str, key: str) -> None:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "text", "text": "How Redis persists data"}],
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    async with httpx.AsyncClient(base_url=server, headers={"x-api-key": key}, timeout=60) as http:
        sent = (await http.post("/a2a/research", json=call)).json()
        task = sent["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed", sent
        got = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}
        again = (await http.post("/a2a/research", json=got)).json()["result"]
        assert again["id"] == task["id"] and "append-only file" in str(again["artifacts"])
        asked = {**message, "messageId": "m-2", "parts": [{"kind": "text", "text": "help"}]}
        stream = {**call, "method": "message/stream", "params": {"message": asked}}
        async with http.stream("POST", "/a2a/notebook", json=stream) as response:
            lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
        events = [json.loads(line.removeprefix("data:"))["result"] for line in lines]
        last = events[-1]  # the stream ends at the pause (a2a-sdk marks it final only at the end)
        assert last["kind"] == "status-update" and last["status"]["state"] == "input-required"
        cancel = {**call, "method": "tasks/cancel", "params": {"id": last["taskId"]}}
        cancelled = (await http.post("/a2a/notebook", json=cancel)).json()["result"]
    assert cancelled["status"]["state"] == "canceled"


async def test_without_the_sdk_a2a_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, api_settings: Settings
) -> None:
    for module in ("a2a.server.request_handlers", "a2a.server.request_handlers.response_helpers"):
        monkeypatch.setitem(sys.modules, module, None)
    app = create_app(api_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        alice = await make_user(client, "alice@example.com")
        card = await client.get("/a2a/research/.well-known/agent-card.json", headers=alice.headers)
        sent = await client.post("/a2a/research", json={}, headers=alice.headers)
        for answered in (card, sent):
            assert answered.status_code == 501 and "teamgraph[a2a]" in answered.json()["detail"]


def test_the_docs_client_example_runs(
    server: str, key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "a2a.md").read_text()
    [code] = re.findall(r"```python client\n(.*?)```", doc, re.DOTALL)
    monkeypatch.setenv("TEAMGRAPH_URL", server)
    monkeypatch.setenv("TEAMGRAPH_API_KEY", key)
    exec(compile(code, "docs/a2a.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert printed.startswith("TASK_STATE_COMPLETED") and "append-only file" in printed
