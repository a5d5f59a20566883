from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
import pytest
from fastapi import FastAPI

from teamgraph.config import Settings
from teamgraph.server.credentials import (
    API_KEY_CACHE_S,
    TOKEN_COOKIE,
    Authenticator,
    Presented,
    create_token,
    presented,
)

from .conftest import PASSWORD, User, make_session


@pytest.mark.parametrize(
    ("password", "problem"),
    [
        ("Sh0rt!", "8 to 64"),
        ("alllower1!", "upper-case"),
        ("ALLUPPER1!", "lower-case"),
        ("NoDigits!!", "digit"),
        ("NoSpecial12", "special"),
        ("A1!" + "a" * 70, "8 to 64"),
    ],
)
async def test_register_enforces_the_password_policy(
    client: httpx.AsyncClient, password: str, problem: str
) -> None:
    response = await client.post(
        "/api/v1/auth/register", json={"email": "x@example.com", "password": password}
    )
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "Validation error"
    assert any(e["field"] == "password" and problem in e["message"] for e in body["errors"])


async def test_register_login_and_duplicates(client: httpx.AsyncClient, alice: User) -> None:
    again = await client.post(
        "/api/v1/auth/register", json={"email": "ALICE@example.com", "password": PASSWORD}
    )
    assert again.status_code == 409
    wrong = await client.post(
        "/api/v1/auth/login", data={"username": alice.email, "password": "Wrong-pass1"}
    )
    assert wrong.status_code == 401


async def test_invalid_tokens_are_401(client: httpx.AsyncClient) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"},
    ):
        response = await client.get("/api/v1/auth/sessions", headers=headers)
        assert response.status_code == 401


async def test_a_token_that_expires_is_refused_after_it_was_accepted(
    client: httpx.AsyncClient, alice: User, api_settings: Settings
) -> None:
    """Tokens are verified once per process: the expiry is still checked at every request."""
    user_id = jwt.decode(alice.token, api_settings.jwt_secret, algorithms=["HS256"])["sub"]
    token, expires = create_token(api_settings.jwt_secret, user_id, minutes=1.2 / 60)
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.get("/api/v1/auth/sessions", headers=headers)).status_code == 200
    await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.05)
    response = await client.get("/api/v1/auth/sessions", headers=headers)
    assert response.status_code == 401
    forged = jwt.encode({"sub": user_id, "exp": expires}, "another-secret-long-enough-for-hs256")
    forged_headers = {"Authorization": f"Bearer {forged}"}
    assert (await client.get("/api/v1/auth/sessions", headers=forged_headers)).status_code == 401


@pytest.mark.parametrize("extra", [{}, {"exp": 10**15}], ids=["no exp", "exp past year 9999"])
async def test_a_signed_token_without_a_usable_expiry_is_401_on_every_route(
    client: httpx.AsyncClient, alice: User, api_settings: Settings, extra: dict[str, int]
) -> None:
    """Correctly signed, but not a token this server issues: refused, never a server error —
    on a plain route and on a rate-limited one (the limiter reads every request's token)."""
    user_id = jwt.decode(alice.token, api_settings.jwt_secret, algorithms=["HS256"])["sub"]
    token = jwt.encode({"sub": user_id, **extra}, api_settings.jwt_secret, algorithm="HS256")
    headers = {"Authorization": f"Bearer {token}"}
    sid = (await make_session(client, alice))["session_id"]
    listed = await client.get("/api/v1/auth/sessions", headers=headers)
    started = await client.post(
        f"/api/v1/sessions/{sid}/runs", json={"input": "hello"}, headers=headers
    )
    assert (listed.status_code, started.status_code) == (401, 401)
    assert "'exp' claim" in listed.json()["detail"]  # names what is wrong with it


async def test_session_lifecycle(client: httpx.AsyncClient, alice: User) -> None:
    created = await make_session(client, alice, name="first", team="research")
    assert created["team"] == "research" and created["token"]["access_token"]
    sid = created["session_id"]
    renamed = await client.patch(
        f"/api/v1/auth/session/{sid}/name", json={"name": "renamed"}, headers=alice.headers
    )
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
    listed = await client.get("/api/v1/auth/sessions", headers=alice.headers)
    assert [s["session_id"] for s in listed.json()] == [sid]
    deleted = await client.delete(f"/api/v1/auth/session/{sid}", headers=alice.headers)
    assert deleted.status_code == 204
    assert (await client.get("/api/v1/auth/sessions", headers=alice.headers)).json() == []


async def test_unknown_team_is_rejected(client: httpx.AsyncClient, alice: User) -> None:
    response = await client.post(
        "/api/v1/auth/session", json={"team": "nope"}, headers=alice.headers
    )
    assert response.status_code == 422 and "Unknown team 'nope'" in response.text


async def test_another_users_session_is_404(
    client: httpx.AsyncClient, alice: User, bob: User
) -> None:
    sid = (await make_session(client, alice))["session_id"]
    for method, path, body in [
        ("PATCH", f"/api/v1/auth/session/{sid}/name", {"name": "mine now"}),
        ("DELETE", f"/api/v1/auth/session/{sid}", None),
        ("POST", f"/api/v1/auth/session/{sid}/token", None),
        ("PATCH", "/api/v1/auth/session/does-not-exist/name", {"name": "x"}),
    ]:
        response = await client.request(method, path, json=body, headers=bob.headers)
        assert response.status_code == 404, (method, path)
    assert (await client.get("/api/v1/auth/sessions", headers=bob.headers)).json() == []


async def test_teams_and_templates(client: httpx.AsyncClient, alice: User) -> None:
    teams = (await client.get("/api/v1/teams", headers=alice.headers)).json()
    assert {"research", "supervised-research", "helpdesk"} <= {t["name"] for t in teams}
    templates = (await client.get("/api/v1/templates", headers=alice.headers)).json()
    assert "code_review" in {t["name"] for t in templates}


def test_a_request_presents_one_credential_read_in_a_fixed_order() -> None:
    def scope(**headers: str) -> dict[str, Any]:
        return {"headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]}

    cookie = f"{TOKEN_COOKIE}=from-cookie; other=1"
    both = scope(authorization="Bearer from-bearer", x_api_key="tg-key", cookie=cookie)
    assert presented(both) == Presented("from-bearer", "bearer")
    basic = scope(authorization="Basic dXNlcjpwYXNz", x_api_key="tg-key", cookie=cookie)
    assert presented(basic) == Presented("tg-key", "api-key-header")
    assert presented(scope(cookie=cookie)) == Presented("from-cookie", "cookie")
    assert presented(scope(authorization="Bearer  ", cookie="other=1")) is None
    assert presented(scope()) is None


async def test_a_revoked_key_is_refused_at_once_here_and_after_the_cache_time_elsewhere(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    """Another process remembers a key's user for API_KEY_CACHE_S seconds at most."""
    made = (await client.post("/api/v1/auth/api-keys", json={}, headers=alice.headers)).json()
    by_key = {"x-api-key": made["key"]}
    assert (await client.get("/api/v1/teams", headers=by_key)).status_code == 200
    now = [0.0]
    elsewhere = Authenticator(
        "unused-secret", app.state.teamgraph.backend.direct, clock=lambda: now[0]
    )
    remembered = await elsewhere.claims(made["key"])
    assert remembered is not None and remembered.session_id is None
    revoked = await client.delete(f"/api/v1/auth/api-keys/{made['id']}", headers=alice.headers)
    assert revoked.status_code == 204
    assert (await client.get("/api/v1/teams", headers=by_key)).status_code == 401  # here: at once
    now[0] = API_KEY_CACHE_S - 0.1
    assert await elsewhere.claims(made["key"]) == remembered
    now[0] = API_KEY_CACHE_S + 0.1
    assert await elsewhere.claims(made["key"]) is None
