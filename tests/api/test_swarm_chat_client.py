"""swarm-ai-chat's client (``ginobefun/swarm-ai-chat``) against teamgraph: its session routes
as ``api-client.ts`` calls them, ``POST /api/chat`` as ``ChatArea``'s ``useChat`` sends it,
the AI SDK data stream parsed as that SDK does, the orchestrator object in the vocabulary of
its workspace panel, and log-in by HttpOnly cookie for a same-origin browser client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import PASSWORD, SLOW_TEAM, User, serving

REQUEST = "Compare PostgreSQL and MongoDB on security and cost"
CLIENT_TASK_STATES = {"pending", "in_progress", "completed", "failed"}
CLIENT_EVENT_TYPES = {
    "ask_user",
    "tasks_created",
    "task_start",
    "agent_reply",
    "task_done",
    "summary",
    "flow_cancelled",
    "system",
}


def use_chat_body(session_id: str, text: str, agent_id: str = "gemini-flash") -> dict[str, Any]:
    """What ``useChat`` (AI SDK 4) posts for ``ChatArea``: the chat id, the messages with their
    ids and parts, and the hook's ``body`` (``agentId`` defaults to the client's own agent)."""
    message = {
        "id": "msg-1",
        "createdAt": "2026-11-24T10:00:00.000Z",
        "role": "user",
        "content": text,
        "parts": [{"type": "text", "text": text}],
    }
    return {
        "id": "chat-1",
        "messages": [message],
        "sessionId": session_id,
        "userId": "the-client-says-so",
        "agentId": agent_id,
    }


def data_stream(text: str) -> list[tuple[str, Any]]:
    """The AI SDK data stream protocol: one ``<code>:<json>`` part per line."""
    parts = []
    for line in text.splitlines():
        code, _, value = line.partition(":")
        parts.append((code, json.loads(value)))
    return parts


async def new_session(client: httpx.AsyncClient, user: User, **body: Any) -> dict[str, Any]:
    created = await client.post("/api/sessions", json=body, headers=user.headers)
    assert created.status_code == 201, created.text
    assert created.json()["success"] is True
    data: dict[str, Any] = created.json()["data"]
    return data


async def test_sessions_as_the_client_manages_them(
    client: httpx.AsyncClient, alice: User, bob: User
) -> None:
    picked = await new_session(client, alice, agentIds=["researcher", "writer"])
    agents = [p["agent"]["id"] for p in picked["participants"] if p["agent"]]
    assert {"researcher", "writer"} <= set(agents)  # the closest team that has both
    teams = (await client.get("/api/v1/teams", headers=alice.headers)).json()
    having = [t for t in teams if {"researcher", "writer"} <= {m["name"] for m in t["members"]}]
    assert len(agents) == min(len(t["members"]) for t in having)
    group = await new_session(client, alice, title="Databases", team="research")
    assert group["primaryAgentId"] is None and group["type"] == "WORKFLOW"
    assert group["messageCount"] == 0 and group["totalCost"] == 0
    direct = await new_session(client, alice, title="Just the writer", agentIds=["writer"])
    assert direct["primaryAgentId"] == "writer" and direct["type"] == "DIRECT"
    assert direct["primaryAgent"]["name"] == "writer"
    unknown = await client.post(
        "/api/sessions", json={"agentIds": ["nobody"]}, headers=alice.headers
    )
    assert unknown.status_code == 422 and "nobody" in unknown.text
    listed = (await client.get("/api/sessions", headers=alice.headers)).json()
    assert listed["success"] is True and listed["count"] == 3
    assert {s["id"] for s in listed["data"]} == {picked["id"], group["id"], direct["id"]}
    # useSessionManager.updateSession: PATCH with the whole session merged in
    patched = await client.patch(
        f"/api/sessions/{group['id']}",
        json={"id": group["id"], "title": "Renamed", "isPinned": True, "messageCount": 9},
        headers=alice.headers,
    )
    assert patched.status_code == 200 and patched.json()["data"]["title"] == "Renamed"
    found = await client.get("/api/sessions?search=renam", headers=alice.headers)
    assert [s["id"] for s in found.json()["data"]] == [group["id"]]
    # owner-scoped: bob sees none of it and reaches none of it
    assert (await client.get("/api/sessions", headers=bob.headers)).json()["count"] == 0
    for method, path in [
        ("PATCH", f"/api/sessions/{group['id']}"),
        ("DELETE", f"/api/sessions/{group['id']}"),
        ("GET", f"/api/sessions/{group['id']}/messages"),
    ]:
        answer = await client.request(method, path, json={"title": "x"}, headers=bob.headers)
        assert answer.status_code == 404, (method, path)
    deleted = await client.delete(f"/api/sessions/{direct['id']}", headers=alice.headers)
    assert deleted.json() == {"success": True, "message": "Session deleted successfully"}
    assert (await client.get("/api/sessions", headers=alice.headers)).json()["count"] == 2


async def test_a_direct_chat_streams_and_its_history_reloads(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await new_session(client, alice, agentIds=["writer"])
    body = use_chat_body(session["id"], REQUEST, agent_id=session["primaryAgentId"])
    reply = await client.post("/api/chat", json=body, headers=alice.headers)
    assert reply.status_code == 200, reply.text
    assert reply.headers["X-Chat-Mode"] == "single" and reply.headers["X-Agent-Id"] == "writer"
    parts = data_stream(reply.text)
    codes = [code for code, _ in parts]
    assert codes[0] == "f" and codes[-2:] == ["e", "d"] and set(codes[1:-2]) == {"0"}
    text = "".join(value for code, value in parts if code == "0")
    run = (
        await client.get(f"/api/v1/runs/{parts[0][1]['messageId']}", headers=alice.headers)
    ).json()
    usage = run["usage"]
    tokens = {"promptTokens": usage["input_tokens"], "completionTokens": usage["output_tokens"]}
    assert parts[-1][1] == {"finishReason": "stop", "usage": tokens}
    assert parts[-2][1] == {"finishReason": "stop", "usage": tokens, "isContinued": False}
    # ChatArea's loadSessionMessages after a reload
    history = await client.get(f"/api/sessions/{session['id']}/messages", headers=alice.headers)
    page = history.json()
    assert page["success"] is True and page["pagination"]["total"] == 2
    user, agent = page["data"]
    assert (user["senderType"], user["content"]) == ("user", REQUEST)
    assert agent["senderType"] == "agent" and agent["content"] == text == run["output"]
    assert agent["tokenCount"] == usage["input_tokens"] + usage["output_tokens"]
    assert agent["cost"] == usage["cost_usd"] and agent["metadata"] == {"runId": run["run_id"]}
    listed = (await client.get("/api/sessions", headers=alice.headers)).json()["data"][0]
    assert listed["messageCount"] == 2 and listed["totalCost"] == usage["cost_usd"]
    second = await client.get(
        f"/api/sessions/{session['id']}/messages?limit=1&offset=1", headers=alice.headers
    )
    assert [m["senderType"] for m in second.json()["data"]] == ["agent"]
    assert second.json()["pagination"]["hasMore"] is False


async def test_the_orchestrator_object_speaks_the_clients_vocabulary(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await new_session(client, alice, team="research")
    # no primary agent: the client sends its default agent id, the whole team answers
    reply = await client.post(
        "/api/chat", json=use_chat_body(session["id"], REQUEST), headers=alice.headers
    )
    assert reply.headers["X-Chat-Mode"] == "multi" and reply.headers["X-Agent-Count"] == "4"
    parts = data_stream(reply.text)
    codes = [code for code, _ in parts]
    assert codes[0] == "f" and codes[-3:] == ["2", "e", "d"] and set(codes[1:-3]) == {"0"}
    told = "".join(value for code, value in parts if code == "0")
    assert told.startswith("> Plan (") and "> ▶ " in told
    [result] = parts[-3][1]
    answer = told.rsplit("\n", 1)[0]
    run = (
        await client.get(
            f"/api/v1/runs/{result['events'][0]['id'].split(':')[0]}", headers=alice.headers
        )
    ).json()
    assert told.endswith(run["output"]) and result["turnIndex"] == 1
    assert result["success"] is True and result["costUSD"] == run["usage"]["cost_usd"]
    tasks = result["tasks"]
    assert len(tasks) == 3 and {t["status"] for t in tasks} <= CLIENT_TASK_STATES
    assert all(t["status"] == "completed" for t in tasks)
    for task in tasks:
        assert set(task) >= {"id", "title", "description", "assignedTo", "priority"}
        assert 0 < len(task["title"]) <= 61 and task["priority"] in ("high", "medium")
    final = [t for t in tasks if t["dependencies"]]
    assert final and all(t["priority"] == "medium" for t in final)
    needed = {d for t in final for d in t["dependencies"]}
    assert all(t["priority"] == "high" for t in tasks if t["id"] in needed)
    events = result["events"]
    assert {e["type"] for e in events} <= CLIENT_EVENT_TYPES
    assert len({e["id"] for e in events}) == len(events)
    assert all(set(e) >= {"id", "type", "timestamp", "content"} for e in events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "tasks_created" and kinds[-1] == "summary"
    assert kinds.count("task_start") == kinds.count("task_done") == 3
    assert all(e["agentId"] for e in events if e["type"] in ("task_start", "agent_reply"))
    # a summary, not the answer again
    assert result["summary"].startswith("3 of 3 tasks completed by ")
    assert len(result["summary"]) < 400 < len(answer)
    assert events[-1]["content"] == result["summary"]


async def test_a_question_then_the_confirmed_intent(
    client: httpx.AsyncClient, alice: User, app: Any
) -> None:
    from teamgraph.runtime.team_api import Team

    state = app.state.teamgraph
    spec = {"name": "desk", "clarify": True, "members": ["researcher", "writer"]}
    state.teams["desk"] = Team.from_dict(spec, settings=state.settings)
    session = await new_session(client, alice, team="desk")
    ask = await client.post(
        "/api/chat", json=use_chat_body(session["id"], "help"), headers=alice.headers
    )
    asked = data_stream(ask.text)
    [result] = asked[-3][1]
    question = result["clarificationQuestion"]
    assert result["shouldClarify"] is True and question.endswith("?")
    assert result["summary"] == f"Waiting for your answer: {question}"
    assert [e["type"] for e in result["events"]][-1] == "ask_user"
    assert asked[-1][1]["finishReason"] == "stop"
    # the older client's shape confirms the intent; the paused run resumes with it
    confirmed = {
        "messages": [{"role": "user", "content": "help"}],
        "data": {"sessionId": session["id"], "confirmedIntent": "compare PostgreSQL and MongoDB"},
    }
    done = data_stream((await client.post("/api/chat", json=confirmed, headers=alice.headers)).text)
    [final] = done[-3][1]
    assert final["success"] is True and final["shouldClarify"] is False
    assert final["turnIndex"] == 2
    assert any("PostgreSQL" in task["description"] for task in final["tasks"])


async def test_a_direct_chats_question_is_answered_by_the_next_message(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await new_session(client, alice, team="notebook")
    ask = await client.post(
        "/api/chat", json=use_chat_body(session["id"], "help"), headers=alice.headers
    )
    assert ask.headers["X-Chat-Mode"] == "single"
    question = "".join(v for c, v in data_stream(ask.text) if c == "0")
    assert question.endswith("?")
    answer = await client.post(
        "/api/chat",
        json=use_chat_body(session["id"], "Find what PostgreSQL offers for JSON"),
        headers=alice.headers,
    )
    told = "".join(v for c, v in data_stream(answer.text) if c == "0")
    assert told != question and "PostgreSQL" in told
    history = await client.get(f"/api/sessions/{session['id']}/messages", headers=alice.headers)
    messages = history.json()["data"]
    assert [m["senderType"] for m in messages] == ["user", "agent", "user", "agent"]
    assert messages[1]["content"] == question
    assert told.endswith("\n" + messages[3]["content"])  # after the progress lines


async def test_an_approval_pause_ends_the_turn_with_a_notice_never_an_error(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await new_session(client, alice, team="notebook")
    save = use_chat_body(session["id"], "Save a note: Redis keeps data in memory")
    paused = data_stream((await client.post("/api/chat", json=save, headers=alice.headers)).text)
    told = "".join(value for code, value in paused if code == "0")
    assert "Waiting for your approval: save_note(" in told
    assert paused[-1][1]["finishReason"] == "stop"
    while_waiting = await client.post(
        "/api/chat", json=use_chat_body(session["id"], "hi"), headers=alice.headers
    )
    assert while_waiting.status_code == 200
    again = "".join(v for c, v in data_stream(while_waiting.text) if c == "0")
    assert again.startswith("Waiting for your approval: save_note(")
    history = await client.get(f"/api/sessions/{session['id']}/messages", headers=alice.headers)
    notices = [m["content"] for m in history.json()["data"] if m["senderType"] == "agent"]
    assert notices == [again, again]  # what the chat said is what reloads


async def test_chat_is_owner_scoped(client: httpx.AsyncClient, alice: User, bob: User) -> None:
    session = await new_session(client, alice)
    reply = await client.post(
        "/api/chat", json=use_chat_body(session["id"], REQUEST), headers=bob.headers
    )
    assert reply.status_code == 404


async def test_log_in_by_cookie_is_http_only_and_csrf_safe(
    client: httpx.AsyncClient, alice: User
) -> None:
    login = await client.post(
        "/api/v1/auth/login", data={"username": alice.email, "password": PASSWORD}
    )
    cookies = login.headers.get_list("set-cookie")
    token_cookie = next(c for c in cookies if c.startswith("teamgraph_token="))
    csrf_cookie = next(c for c in cookies if c.startswith("teamgraph_csrf="))
    assert "HttpOnly" in token_cookie and "samesite=lax" in token_cookie.lower()
    assert "HttpOnly" not in csrf_cookie
    assert (await client.get("/api/sessions")).json()["success"] is True  # the cookie alone
    body = {"title": "by cookie"}
    refused = await client.post("/api/sessions", json=body)
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.text
    cross = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert (await client.post("/api/sessions", json=body, headers=cross)).status_code == 403
    for same in (
        {"Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://test"},  # the host the request was sent to
        {"X-CSRF-Token": client.cookies["teamgraph_csrf"]},
    ):
        accepted = await client.post("/api/sessions", json=body, headers=same)
        assert accepted.status_code == 201, (same, accepted.text)
    wrong = await client.post("/api/sessions", json=body, headers={"X-CSRF-Token": "guess"})
    assert wrong.status_code == 403
    # a bearer token is never subject to the cookie's check
    assert (await client.post("/api/sessions", json=body, headers=alice.headers)).status_code == 201
    out = await client.post("/api/v1/auth/logout", headers={"Sec-Fetch-Site": "same-origin"})
    assert out.status_code == 204
    assert "teamgraph_token" not in client.cookies
    assert (await client.get("/api/sessions")).status_code == 401


def test_chat_text_arrives_while_the_run_goes_on(tmp_path: Path, api_settings: Settings) -> None:
    """Against a real server (the in-process ASGI transport buffers responses): the first text
    part arrives while the run is still running; the orchestrator part comes after the text."""
    teams = tmp_path / "teams"
    teams.mkdir()
    (teams / "slow.yaml").write_text(SLOW_TEAM)
    settings = api_settings.model_copy(update={"teams_dirs": [str(teams)]})
    with serving(create_app(settings)) as base, httpx.Client(base_url=base, timeout=30) as client:
        client.post("/api/v1/auth/register", json={"email": "d@example.com", "password": PASSWORD})
        client.post("/api/v1/auth/login", data={"username": "d@example.com", "password": PASSWORD})
        same = {"Sec-Fetch-Site": "same-origin"}  # as a browser on the same origin sends it
        session = client.post("/api/sessions", json={}, headers=same).json()["data"]
        body = use_chat_body(session["id"], "Research Redis and write it up")
        codes, statuses = [], []
        with client.stream("POST", "/api/chat", json=body, headers=same) as response:
            assert response.headers["X-Chat-Mode"] == "multi"
            for line in response.iter_lines():
                code = line.partition(":")[0]
                codes.append(code)
                if code == "0" and codes.count("0") == 1:
                    runs = client.get(f"/api/v1/sessions/{session['id']}/runs")
                    statuses.append(runs.json()[0]["status"])
    assert statuses == ["running"]
    assert codes[0] == "f" and codes[-3:] == ["2", "e", "d"] and codes.count("0") > 3
