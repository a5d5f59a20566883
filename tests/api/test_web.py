"""What the web workspace needs from the server: its page and modules under a strict CSP, a
session's conversation with the user's token, and each team's budget."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.api.conftest import User, make_session
from tests.api.test_runs import API, REQUEST, serve, sse, start


async def test_the_page_and_its_modules_are_served_under_a_strict_csp(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/js/app.js">' in page.text
    for response in (page, await client.get("/ui/js/runstate.js")):
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "object-src 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
    module = await client.get("/ui/js/runstate.js")
    assert module.headers["content-type"].startswith("text/javascript")
    assert "export function reduce" in module.text
    assert (await client.get("/ui/js/missing.js")).status_code == 404
    assert (await client.get("/ui/../server/app.py")).status_code == 404
    assert "/ui" not in (await client.get("/openapi.json")).text  # not part of the API


async def test_a_sessions_conversation_is_its_owners_alone(
    client: httpx.AsyncClient, alice: User, bob: User
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    events = await sse(client, alice, run_id)
    response = await client.get(f"{API}/sessions/{sid}/messages", headers=alice.headers)
    assert response.status_code == 200
    said = [(m["role"], m["content"], m["run_id"]) for m in response.json()]
    assert said == [("user", REQUEST, run_id), ("assistant", events[-1]["data"]["output"], run_id)]
    for user, status in ((bob, 404), (None, 401)):
        headers = user.headers if user else {}
        probe = await client.get(f"{API}/sessions/{sid}/messages", headers=headers)
        assert probe.status_code == status
    unknown = await client.get(f"{API}/sessions/nope/messages", headers=alice.headers)
    assert unknown.status_code == 404


async def test_teams_list_their_budget(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    serve(app, {"name": "frugal", "members": ["writer"], "budget": {"max_tokens": 5000}})
    teams = {t["name"]: t for t in (await client.get(f"{API}/teams", headers=alice.headers)).json()}
    assert teams["frugal"]["budget"] == {"max_tokens": 5000}
    assert teams["research"]["budget"] is None
