"""Hostile input gets a clear no, and one user never hurts another (issue 31): refused turns
store nothing that stays open, every JSON body has depth and size limits, a session token acts
on its own session only, forged headers and odd ids get a 4xx naming what was wrong."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import User, make_session

BLANK = "   \n\t "


async def _session_headers(client: httpx.AsyncClient, user: User, **body: Any) -> dict[str, str]:
    session = await make_session(client, user, **body)
    return {"Authorization": f"Bearer {session['token']['access_token']}"}


async def _open_runs(client: httpx.AsyncClient, user: User) -> list[dict[str, Any]]:
    sessions = (await client.get("/api/v1/auth/sessions", headers=user.headers)).json()
    runs: list[dict[str, Any]] = []
    for session in sessions:
        listed = await client.get(
            f"/api/v1/sessions/{session['session_id']}/runs", headers=user.headers
        )
        assert listed.status_code == 200, listed.text
        runs += [r for r in listed.json() if r["status"] not in ("failed", "cancelled")]
    return runs


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/chatbot/chat",
        "/api/v1/chatbot/chat/stream",
        "/api/v1/chatbot/workflow/chat",
        "/api/v1/chatbot/workflow/chat/stream",
    ],
)
async def test_a_refused_chat_turn_leaves_no_open_run(
    client: httpx.AsyncClient, alice: User, path: str
) -> None:
    headers = await _session_headers(client, alice, team="research")
    body = {"messages": [{"role": "user", "content": BLANK}]}
    reply = await client.post(path, json=body, headers=headers)
    assert reply.status_code == 400, reply.text
    assert "empty" in reply.text
    assert await _open_runs(client, alice) == []


async def test_a_refused_swarm_chat_turn_leaves_no_open_run(
    client: httpx.AsyncClient, alice: User
) -> None:
    session = await client.post("/api/sessions", json={"title": "t"}, headers=alice.headers)
    assert session.status_code == 201, session.text
    body = {
        "messages": [{"role": "user", "content": BLANK}],
        "sessionId": session.json()["data"]["id"],
    }
    reply = await client.post("/api/chat", json=body, headers=alice.headers)
    assert reply.status_code == 400, reply.text
    assert await _open_runs(client, alice) == []


async def test_a_run_refused_after_its_row_is_stored_ends_failed_with_why(
    client: httpx.AsyncClient, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamgraph.server import run_manager

    monkeypatch.setattr(run_manager, "check_request", lambda request: None)  # the runner refuses
    headers = await _session_headers(client, alice, team="research")
    body = {"messages": [{"role": "user", "content": BLANK}]}
    reply = await client.post("/api/v1/chatbot/chat", json=body, headers=headers)
    assert reply.status_code == 400, reply.text
    assert await _open_runs(client, alice) == []
    session_id = (await client.get("/api/v1/auth/sessions", headers=alice.headers)).json()[0]
    runs = await client.get(
        f"/api/v1/sessions/{session_id['session_id']}/runs", headers=alice.headers
    )
    (run,) = runs.json()
    stored = await client.get(f"/api/v1/runs/{run['run_id']}", headers=alice.headers)
    assert stored.json()["status"] == "failed" and "empty" in stored.json()["error"]
