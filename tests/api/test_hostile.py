"""Hostile input gets a clear no, and one user never hurts another (issue 31): refused turns
store nothing that stays open, every JSON body has depth and size limits, a session token acts
on its own session only, forged headers and odd ids get a 4xx naming what was wrong."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from teamgraph.config import Settings
from teamgraph.server.app import create_app, proxy_options

from .conftest import PASSWORD, User, make_session, serving
from .test_runs import API, REQUEST, sse, start

BLANK = "   \n\t "


def deep(levels: int) -> str:
    """A JSON value nested ``levels`` deep (lists and objects), as text."""
    opens = "".join('{"a":' if i % 2 else "[" for i in range(levels))
    closes = "".join("}" if i % 2 else "]" for i in reversed(range(levels)))
    return f'{opens}"x"{closes}'


def body(template: dict[str, Any], **deep_fields: str) -> dict[str, Any]:
    """``template`` as a request's JSON text with ``deep_fields`` spliced in, sent as JSON."""
    text = json.dumps(template)[:-1]
    text += "".join(f', "{name}": {value}' for name, value in deep_fields.items()) + "}"
    return {"content": text, "headers": {"content-type": "application/json"}}


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


async def test_a_json_body_nested_too_deep_is_400_naming_the_limit(
    client: httpx.AsyncClient, alice: User
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    for url, sent in (
        (f"{API}/sessions/{sid}/runs", body({"input": "fine"}, extra=deep(900))),
        (f"{API}/runs/0123456789abcdef/resume", body({}, default=deep(900))),
        ("/api/v1/auth/session", body({}, name=deep(40))),
        ("/v1/chat/completions", body({"model": "research"}, messages=deep(900))),
    ):
        headers = {**alice.headers, **sent.pop("headers")}
        reply = await client.post(url, headers=headers, **sent)
        assert reply.status_code == 400, (url, reply.text)
        assert "nested deeper than 32 levels" in reply.text, reply.text  # in its dialect's shape
    raw = "[" * 100_000  # not even JSON: still the depth that is refused, not a RecursionError
    reply = await client.post(
        f"{API}/sessions/{sid}/runs",
        content=raw,
        headers={**alice.headers, "content-type": "application/json"},
    )
    assert reply.status_code == 400 and "32 levels" in reply.text


async def test_a_json_body_at_the_depth_limit_is_accepted(
    client: httpx.AsyncClient, alice: User
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    plain = {"input": "fine", "options": {}}
    reply = await client.post(f"{API}/sessions/{sid}/runs", json=plain, headers=alice.headers)
    assert reply.status_code == 202, reply.text
    within = body({}, name=deep(31))  # the body's own object is the 32nd level
    headers = {**alice.headers, **within.pop("headers")}
    reply = await client.post("/api/v1/auth/session", headers=headers, **within)
    assert reply.status_code == 422, reply.text  # through the edge: the route says why


async def test_a_body_that_is_not_utf8_is_400_saying_so(
    client: httpx.AsyncClient, alice: User
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    reply = await client.post(
        f"{API}/sessions/{sid}/runs",
        content=b'{"input": "caf\xe9"}',
        headers={**alice.headers, "content-type": "application/json"},
    )
    assert reply.status_code == 400 and "UTF-8" in reply.json()["detail"], reply.text


async def test_another_users_poison_costs_a_concurrent_run_no_event(
    client: httpx.AsyncClient, alice: User, bob: User
) -> None:
    """Bob's run beside Alice's poison payloads (deep, huge, not UTF-8): Bob's run has every
    event, its seqs 1..N with no gap, and ends completed."""
    bob_sid = (await make_session(client, bob, team="research"))["session_id"]
    alice_sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, bob, bob_sid, REQUEST)
    poisons: list[dict[str, Any]] = [
        body({"input": "fine"}, extra=deep(900)),
        {"json": {"input": "fine " + "y" * 19_000, "extra": ["z" * 1000] * 2000}},
        {"content": b'{"input": "\xff\xfe"}', "headers": {"content-type": "application/json"}},
    ]

    async def poison(kwargs: dict[str, Any]) -> int:
        headers = {**alice.headers, **kwargs.pop("headers", {})}
        url = f"{API}/sessions/{alice_sid}/runs"
        return (await client.post(url, headers=headers, **kwargs)).status_code

    codes = await asyncio.gather(*(poison(dict(p)) for p in poisons))
    assert all(400 <= code < 500 for code in codes), codes
    events = await sse(client, bob, run_id)
    seqs = [e["id"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert events[-1]["event"] == "run_completed"
    stored = (await client.get(f"{API}/runs/{run_id}", headers=bob.headers)).json()
    assert stored["status"] == "completed"
    assert json.dumps(stored)  # and its row reads back whole


def _registrations(base: str, forged: list[str], who: str) -> list[int]:
    codes = []
    with httpx.Client(base_url=base) as http:
        for n, address in enumerate(forged):
            body = {"email": f"{who}{n}@example.com", "password": PASSWORD}
            headers = {"X-Forwarded-For": address}
            codes.append(http.post("/api/v1/auth/register", json=body, headers=headers).status_code)
    return codes


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_no_proxy_is_trusted_unless_listed(api_settings: Settings) -> None:
    """A forged X-Forwarded-For buys no fresh rate-limit bucket by default; a listed proxy's
    header is believed."""
    limited = api_settings.model_copy(update={"rate_limits": {"register": "2/minute"}})
    forged = ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"]
    with serving(create_app(limited), **proxy_options(limited.trusted_proxies)) as base:
        assert _registrations(base, forged, "a") == [201, 201, 429, 429]
    assert Settings(trusted_proxies=["127.0.0.1"]).trusted_proxies == ["127.0.0.1"]
    again = limited.model_copy(update={"trusted_proxies": ["127.0.0.1"]})
    with serving(create_app(again), **proxy_options(again.trusted_proxies)) as base:
        assert _registrations(base, forged, "b") == [201, 201, 201, 201]


async def test_a_session_token_acts_on_its_own_session_only(
    client: httpx.AsyncClient, alice: User
) -> None:
    mine = await make_session(client, alice, team="research")
    other = await make_session(client, alice, team="research")
    token = {"Authorization": f"Bearer {mine['token']['access_token']}"}
    sid, oid = mine["session_id"], other["session_id"]
    other_run = await start(client, alice, oid, REQUEST)
    refused = [
        ("GET", "/api/v1/auth/sessions", None),
        ("POST", "/api/v1/auth/session", {}),
        ("PATCH", f"/api/v1/auth/session/{oid}/name", {"name": "mine now"}),
        ("DELETE", f"/api/v1/auth/session/{oid}", None),
        ("POST", f"/api/v1/auth/session/{oid}/token", None),
        ("GET", f"/api/v1/sessions/{oid}/messages", None),
        ("GET", f"{API}/sessions/{oid}/runs", None),
        ("POST", f"{API}/sessions/{oid}/runs", {"input": REQUEST}),
        ("GET", f"{API}/runs/{other_run}", None),
        ("GET", f"{API}/runs/{other_run}/events", None),
        ("GET", "/api/sessions", None),
        ("POST", "/api/sessions", {"title": "t"}),
        ("PATCH", f"/api/sessions/{oid}", {"title": "mine now"}),
        ("DELETE", f"/api/sessions/{oid}", None),
    ]
    for method, url, sent in refused:
        reply = await client.request(method, url, json=sent, headers=token)
        assert reply.status_code == 403, (method, url, reply.text)
        assert sid in reply.json()["detail"] and "session token" in reply.json()["detail"]
    listed = await client.get("/api/v1/auth/sessions", headers=alice.headers)
    assert {s["session_id"] for s in listed.json()} == {sid, oid}  # the user token manages them
    assert "mine now" not in listed.text
    own = await client.patch(f"/api/v1/auth/session/{sid}/name", json={"name": "n"}, headers=token)
    assert own.status_code == 200, own.text
    assert (await client.get(f"/api/v1/sessions/{sid}/messages", headers=token)).status_code == 200
    gone = await client.delete(f"/api/v1/auth/session/{oid}", headers=alice.headers)
    assert gone.status_code == 204


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"json": ["a", "b"]}, 422),
        ({"json": "just a string"}, 422),
        ({"content": b'{"name": ', "headers": {"content-type": "application/json"}}, 422),
        ({"content": b"", "headers": {"content-type": "application/json"}}, 422),
    ],
)
async def test_a_rename_with_a_body_that_is_no_object_is_4xx(
    client: httpx.AsyncClient, alice: User, sent: dict[str, Any], expected: int
) -> None:
    sid = (await make_session(client, alice))["session_id"]
    headers = {**alice.headers, **sent.pop("headers", {})}
    url = f"/api/v1/auth/session/{sid}/name"
    reply = await client.patch(url, headers=headers, **sent)
    assert reply.status_code == expected, reply.text
    assert "name" in reply.text or "JSON" in reply.text


@pytest.mark.parametrize("digits", ["¹", "²³", "٣", "1¹", "𝟙"])
async def test_unicode_digits_in_ids_are_4xx(
    client: httpx.AsyncClient, alice: User, digits: str
) -> None:
    for method, url in (
        ("GET", f"/api/v1/rag/documents/{digits}/chunks"),
        ("DELETE", f"/api/v1/rag/documents/{digits}"),
    ):
        reply = await client.request(method, url, headers=alice.headers)
        assert reply.status_code == 404, (url, reply.text)
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    if not digits.isascii() and not all(ord(c) < 256 for c in digits):
        return  # a header is latin-1
    for url in (f"{API}/runs/{run_id}/events", f"/threads/{sid}/runs/{run_id}/stream"):
        headers = {**alice.headers, "Last-Event-ID": digits.encode("latin-1")}
        reply = await client.get(url, headers=headers)
        assert reply.status_code in (200, 404, 422), (url, reply.text)


async def test_a_content_length_that_is_no_number_is_not_a_500() -> None:
    from teamgraph.server.middleware import BodyLimitMiddleware

    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/x", "headers": [(b"content-length", "¹".encode("latin-1"))]}
    await BodyLimitMiddleware(app, 1024)(scope, receive, send)
    assert sent[0]["status"] == 204


async def _body_messages(app: Any, path: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """What the app sends for ``GET path``, message by message (the ASGI ``send`` calls)."""
    sent: list[dict[str, Any]] = []
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), *raw],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client never goes away
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return [m for m in sent if m["type"] == "http.response.body"]


@pytest.mark.parametrize("live", [True, False], ids=["live", "finished"])
async def test_a_finished_event_stream_ends_with_its_last_event(
    app: Any, client: httpx.AsyncClient, alice: User, live: bool
) -> None:
    """The body's end (``more_body: false``) comes with the run's last event, not after it: a
    page acting on that event finds the response complete (no ``net::ERR_ABORTED``)."""
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    if not live:
        await sse(client, alice, run_id)  # to its end: the stream below replays a finished run
    body = await _body_messages(app, f"{API}/runs/{run_id}/events", alice.headers)
    *before, last = body
    assert all(m.get("more_body") for m in before)
    assert last.get("more_body", False) is False
    assert b"event: run_completed" in last["body"], last


async def test_the_runs_of_a_deleted_thread_are_404_on_the_agent_protocol(
    client: httpx.AsyncClient, alice: User
) -> None:
    """Found by the hostile fuzz: a run outlives its deleted session; joining it was a 500."""
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    await sse(client, alice, run_id)
    assert (
        await client.delete(f"/api/v1/auth/session/{sid}", headers=alice.headers)
    ).status_code == 204
    for suffix in ("", "/join", "/stream"):
        url = f"/langgraph/threads/{sid}/runs/{run_id}{suffix}"
        reply = await client.get(url, headers=alice.headers)
        assert reply.status_code == 404, (url, reply.text)


def _token(settings: Settings, claims: dict[str, Any], secret: str | None = None) -> str:
    import jwt

    return jwt.encode(claims, secret or settings.jwt_secret, algorithm="HS256")


async def test_tokens_without_the_claims_of_ours_are_401_naming_the_token(
    client: httpx.AsyncClient, alice: User, api_settings: Settings
) -> None:
    import jwt

    me = jwt.decode(alice.token, options={"verify_signature": False})
    later = me["exp"]
    forged = {
        "no exp": _token(api_settings, {"sub": me["sub"]}),
        "no sub": _token(api_settings, {"exp": later}),
        "sub not a string": _token(api_settings, {"sub": 7, "exp": later}),
        "exp not a number": _token(api_settings, {"sub": me["sub"], "exp": "tomorrow"}),
        "exp past 9999": _token(api_settings, {"sub": me["sub"], "exp": 10**12}),
        "another secret": _token(api_settings, {"sub": me["sub"], "exp": later}, "x" * 40),
        "alg none": jwt.encode({"sub": me["sub"], "exp": later}, key=None, algorithm="none"),
        "not a jwt": "not.a.jwt",
    }
    named = {  # what the 401 says is wrong
        "no exp": "no 'exp' claim",
        "no sub": "'sub' claim",
        "sub not a string": "'sub' claim",
        "exp not a number": "token",
        "exp past 9999": "'exp' claim",
        "another secret": "did not sign it",
        "alg none": "token",
        "not a jwt": "not a token this server issues",
    }
    for what, token in forged.items():
        reply = await client.get(
            "/api/v1/auth/sessions", headers={"Authorization": f"Bearer {token}"}
        )
        assert reply.status_code == 401, (what, reply.text)
        assert named[what] in reply.json()["detail"], (what, reply.text)
    empty = await client.get("/api/v1/auth/sessions", headers={"Authorization": "Bearer "})
    assert empty.status_code == 401 and "Not authenticated" in empty.text


async def test_huge_bodies_and_forged_headers_get_a_clear_no(
    client: httpx.AsyncClient, alice: User, api_settings: Settings
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    url = f"{API}/sessions/{sid}/runs"
    huge = b'{"input": "' + b"x" * (api_settings.max_body_bytes + 1) + b'"}'
    headers = {**alice.headers, "content-type": "application/json"}
    reply = await client.post(url, content=huge, headers=headers)
    assert reply.status_code == 413 and f"{api_settings.max_body_bytes} bytes" in reply.text
    long_input = await client.post(url, json={"input": "x" * 20_001}, headers=alice.headers)
    assert long_input.status_code == 422 and "20000" in long_input.text
    odd = {"X-Request-ID": b"x" * 500 + b"\xe9", "X-Forwarded-For": b"1.2.3.4, \xff"}
    reply = await client.get("/api/v1/teams", headers={**alice.headers, **odd})
    assert reply.status_code == 200 and len(reply.headers["x-request-id"]) == 32  # not echoed
