"""The FastAPI agent template's chat routes work unchanged: workflow chat (+stream, templates),
chat with modes, messages (swarm-ai-chat's /api/chat: test_swarm_chat_client.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .conftest import User, make_session

REQUEST = "Compare PostgreSQL and MongoDB on security and cost"


async def _session_headers(client: httpx.AsyncClient, user: User, **body: Any) -> dict[str, str]:
    session = await make_session(client, user, **body)
    return {"Authorization": f"Bearer {session['token']['access_token']}"}


def _body(text: str = REQUEST) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_workflow_chat_and_templates(client: httpx.AsyncClient, alice: User) -> None:
    headers = await _session_headers(client, alice, team="research")
    reply = await client.post("/api/v1/chatbot/workflow/chat", json=_body(), headers=headers)
    assert reply.status_code == 200, reply.text
    messages = reply.json()["messages"]
    assert messages[0]["content"] == REQUEST and messages[-1]["role"] == "assistant"
    assert messages[-1]["content"].startswith("# Workflow Results:")
    templated = await client.post(
        "/api/v1/chatbot/workflow/chat?template=research_report",
        json=_body("Quantum batteries"),
        headers=headers,
    )
    assert "# Workflow Results: research_report" in templated.json()["messages"][-1]["content"]
    names = {
        t["name"]
        for t in (await client.get("/api/v1/chatbot/workflow/templates", headers=headers)).json()[
            "templates"
        ]
    }
    # only templates whose workers the research team has (code_review needs a coder)
    assert names == {"research_report", "parallel_comparison"}
    unfit = await client.post(
        "/api/v1/chatbot/workflow/chat?template=code_review", json=_body(), headers=headers
    )
    assert unfit.status_code == 422
    assert "code_review" in unfit.text and "needs coder" in unfit.text
    assert "research_report" in unfit.text  # what does fit
    unknown = await client.post(
        "/api/v1/chatbot/workflow/chat/stream?template=nope", json=_body(), headers=headers
    )
    assert unknown.status_code == 422 and "no such template" in unknown.text


async def test_workflow_stream_tells_the_run_then_the_answer_then_done(
    client: httpx.AsyncClient, alice: User
) -> None:
    headers = await _session_headers(client, alice, team="research")
    async with client.stream(
        "POST", "/api/v1/chatbot/workflow/chat/stream", json=_body(), headers=headers
    ) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
    chunks = [json.loads(line.removeprefix("data:").strip()) for line in lines]
    assert chunks[-1] == {"content": "", "done": True}
    assert all(not c["done"] for c in chunks[:-1]) and len(chunks) > 2
    told = "".join(c["content"] for c in chunks)
    assert told.startswith("> Plan (") and "> ▶ " in told and "> ✓ " in told
    stored = (await client.get("/api/v1/chatbot/messages", headers=headers)).json()["messages"]
    answer = stored[-1]["content"]
    assert answer.startswith("# Workflow Results:") and told.endswith("\n" + answer)


async def test_chat_modes_and_messages(client: httpx.AsyncClient, alice: User) -> None:
    headers = await _session_headers(client, alice, team="research")
    single = await client.post("/api/v1/chatbot/chat?mode=single", json=_body(), headers=headers)
    multi = await client.post("/api/v1/chatbot/chat?mode=multi", json=_body(), headers=headers)
    assert not single.json()["messages"][-1]["content"].startswith("# Workflow Results")
    assert multi.json()["messages"][-1]["content"].startswith("# Workflow Results")
    history = (await client.get("/api/v1/chatbot/messages", headers=headers)).json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    cleared = await client.delete("/api/v1/chatbot/messages", headers=headers)
    assert cleared.json()["deleted"] == 4
    assert (await client.get("/api/v1/chatbot/messages", headers=headers)).json() == {
        "messages": []
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "at least 1 character"),
        ("x" * 3001, "at most 3000"),
        ("hi <script>alert(1)</script>", "script"),
        ("nul \x00 byte", "NUL"),
    ],
)
async def test_message_validation(
    client: httpx.AsyncClient, alice: User, content: str, message: str
) -> None:
    headers = await _session_headers(client, alice)
    reply = await client.post("/api/v1/chatbot/chat", json=_body(content), headers=headers)
    assert reply.status_code == 422
    body = reply.json()
    assert body["detail"] == "Validation error"
    assert body["errors"][0]["field"] == "messages.0.content"
    assert message in body["errors"][0]["message"]


async def test_chat_routes_need_a_session_token(client: httpx.AsyncClient, alice: User) -> None:
    reply = await client.post("/api/v1/chatbot/chat", json=_body(), headers=alice.headers)
    assert reply.status_code == 401 and "session token" in reply.text
