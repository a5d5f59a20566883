"""A team as an OpenAI model, driven by the official ``openai`` Python SDK against the server
served by uvicorn (models, completions streamed and not, usage, progress as reasoning, a paused
run continued in the conversation, errors in OpenAI's shape), and per-user API keys."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import create_engine, text

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import PASSWORD, serving


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


def login(base: str, email: str) -> str:
    with httpx.Client(base_url=base) as http:
        http.post("/api/v1/auth/register", json={"email": email, "password": PASSWORD})
        token = http.post("/api/v1/auth/login", data={"username": email, "password": PASSWORD})
        return str(token.json()["access_token"])


def new_key(base: str, token: str, name: str = "laptop") -> dict[str, Any]:
    made = httpx.post(
        f"{base}/api/v1/auth/api-keys",
        json={"name": name},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert made.status_code == 201, made.text
    data: dict[str, Any] = made.json()
    return data


@pytest.fixture
def client(server: str) -> openai.OpenAI:
    key = new_key(server, login(server, "sdk@example.com"))["key"]
    return openai.OpenAI(base_url=f"{server}/v1", api_key=key, max_retries=0, timeout=60)


# --- API keys ----------------------------------------------------------------------------------
def test_an_api_key_is_shown_once_stored_hashed_and_revocable(
    server: str, api_settings: Settings
) -> None:
    token = login(server, "keys@example.com")
    made = new_key(server, token)
    key = made["key"]
    assert key.startswith("tg-") and len(key) > 40 and made["prefix"] == key[:11]
    auth = {"Authorization": f"Bearer {token}"}
    listed = httpx.get(f"{server}/api/v1/auth/api-keys", headers=auth).json()
    assert [k["id"] for k in listed] == [made["id"]] and "key" not in listed[0]
    url = api_settings.database_url
    if api_settings.is_postgres:
        url = api_settings.postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT * FROM api_keys")).mappings().one()
    engine.dispose()
    assert stored["key_hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in json.dumps({k: str(v) for k, v in stored.items()})
    by_key = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{server}/api/v1/teams", headers=by_key).status_code == 200
    other = {"Authorization": f"Bearer {login(server, 'other@example.com')}"}
    gone = httpx.delete(f"{server}/api/v1/auth/api-keys/{made['id']}", headers=other)
    assert gone.status_code == 404  # another user's key is not theirs to revoke
    revoked = httpx.delete(f"{server}/api/v1/auth/api-keys/{made['id']}", headers=auth)
    assert revoked.status_code == 204
    refused = httpx.get(f"{server}/api/v1/teams", headers=by_key)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]


# --- the official SDK ---------------------------------------------------------------------------
def test_teams_are_models(client: openai.OpenAI) -> None:
    names = {m.id for m in client.models.list()}
    assert {"research", "assistant", "notebook"} <= names


def test_a_completion_is_the_teams_answer_with_its_usage(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Find how Redis persists data"}]
    )
    answer = done.choices[0].message.content or ""
    assert "Redis" in answer and "append-only file" in answer  # from the knowledge base
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0
    about = (done.model_extra or {})["teamgraph"]
    assert about["status"] == "completed" and done.id == f"chatcmpl-{about['run_id']}"


def test_a_stream_says_the_same_answer_and_ends_with_usage(client: openai.OpenAI) -> None:
    ask = [{"role": "user", "content": "Find how Redis persists data"}]
    whole = client.chat.completions.create(model="assistant", messages=ask)  # type: ignore[arg-type]
    chunks = list(
        client.chat.completions.create(
            model="assistant",
            messages=ask,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert said == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "stop" and set(finish[:-1]) == {None}
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0


def test_progress_comes_as_reasoning_only_when_asked(client: openai.OpenAI) -> None:
    ask = [{"role": "user", "content": "Compare PostgreSQL and MongoDB on security and cost"}]

    def reasoning(**extra: Any) -> str:
        stream = client.chat.completions.create(
            model="research",
            messages=ask,  # type: ignore[arg-type]
            stream=True,
            extra_body=extra,
        )
        parts = [(c.choices[0].delta.model_extra or {}) for c in stream if c.choices]
        return "".join(p.get("reasoning_content") or "" for p in parts)

    shown = reasoning(progress="reasoning")
    assert "Plan (rules, 3 steps)" in shown and "research_security" in shown
    assert reasoning() == ""


def test_a_paused_run_is_continued_in_the_conversation(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(
        model="notebook", messages=[{"role": "user", "content": "help"}]
    )
    asked = first.choices[0].message.content or ""
    about = (first.model_extra or {})["teamgraph"]
    assert about["status"] == "interrupted" and f"run {about['run_id']} is paused" in asked
    history = [
        {"role": "user", "content": "help"},
        {"role": "assistant", "content": asked},
        {"role": "user", "content": "How Redis persists data"},
    ]
    second = client.chat.completions.create(model="notebook", messages=history)  # type: ignore[arg-type]
    then = (second.model_extra or {})["teamgraph"]
    assert (then["run_id"], then["session_id"]) == (about["run_id"], about["session_id"])
    assert then["status"] == "completed" and "Redis" in (second.choices[0].message.content or "")


def test_errors_have_openais_shape(client: openai.OpenAI, server: str) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert missing.value.code == "model_not_found" and "GET /v1/models" in missing.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="assistant", messages=[])
    assert bad.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as nul:
        client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "a\x00b"}]
        )
    assert "NUL" in nul.value.message and nul.value.param == "messages.0"
    stranger = openai.OpenAI(base_url=f"{server}/v1", api_key="tg-not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        stranger.models.list()
    assert denied.value.code == "invalid_api_key"


def test_a_conversation_is_found_only_by_its_own_user(server: str, tmp_path: Path) -> None:
    def sdk(email: str) -> openai.OpenAI:
        key = new_key(server, login(server, email))["key"]
        return openai.OpenAI(base_url=f"{server}/v1", api_key=key, max_retries=0, timeout=60)

    alice, bob = sdk("a@example.com"), sdk("b@example.com")
    first = alice.chat.completions.create(
        model="notebook", messages=[{"role": "user", "content": "help"}]
    )
    history = [
        {"role": "user", "content": "help"},
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "How Redis persists data"},
    ]
    theirs = bob.chat.completions.create(model="notebook", messages=history)  # type: ignore[arg-type]
    mine, others = (first.model_extra or {})["teamgraph"], (theirs.model_extra or {})["teamgraph"]
    assert others["session_id"] != mine["session_id"]  # Bob's copy starts his own conversation


def test_the_docs_client_example_runs(
    server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "openai.md").read_text()
    [code] = re.findall(r"```python client\n(.*?)```", doc, re.DOTALL)
    monkeypatch.setenv("TEAMGRAPH_URL", server)
    monkeypatch.setenv(
        "TEAMGRAPH_API_KEY", new_key(server, login(server, "doc@example.com"))["key"]
    )
    exec(compile(code, "docs/openai.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "'research'" in printed and "append-only file" in printed and "tokens" in printed


def test_a_model_is_retrieved_by_its_name(client: openai.OpenAI) -> None:
    found = client.models.retrieve("research")
    assert (found.id, found.object, found.owned_by) == ("research", "model", "teamgraph")
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("nope")
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    assert "GET /v1/models" in missing.value.message


@pytest.mark.parametrize(
    ("reply", "outcome"), [("approve", "saved note"), ("Reject: no", "rejected")]
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_approval_is_decided_by_replying_to_the_notice(
    client: openai.OpenAI, reply: str, outcome: str, stream: bool
) -> None:
    asked = [{"role": "user", "content": "Save a note: Redis keeps data in memory"}]
    first = client.chat.completions.create(model="notebook", messages=asked)  # type: ignore[arg-type]
    notice = first.choices[0].message.content or ""
    about = (first.model_extra or {})["teamgraph"]
    assert notice.startswith("Waiting for your approval: save_note(")
    assert about["status"] == "interrupted" and 'Reply "approve" or "reject"' in notice
    history = [*asked, {"role": "assistant", "content": notice}]
    chatter = client.chat.completions.create(
        model="notebook",
        messages=[*history, {"role": "user", "content": "hi"}],  # type: ignore[list-item]
    )
    assert (chatter.choices[0].message.content or "").startswith("Waiting for your approval")
    history = [*history, {"role": "user", "content": "hi"}]
    history.append({"role": "assistant", "content": chatter.choices[0].message.content or ""})
    history.append({"role": "user", "content": reply})
    if stream:
        chunks = list(
            client.chat.completions.create(model="notebook", messages=history, stream=True)
        )  # type: ignore[call-overload]
        answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        then = next(
            (c.model_extra or {})["teamgraph"]
            for c in chunks
            if "teamgraph" in (c.model_extra or {})
        )
    else:
        decided = client.chat.completions.create(model="notebook", messages=history)  # type: ignore[arg-type]
        answer = decided.choices[0].message.content or ""
        then = (decided.model_extra or {})["teamgraph"]
    assert (then["run_id"], then["session_id"]) == (about["run_id"], about["session_id"])
    assert then["status"] == "completed" and outcome in answer


def test_errors_answered_before_the_app_have_openais_shape(api_settings: Settings) -> None:
    settings = api_settings.model_copy(
        update={"max_body_bytes": 2048, "rate_limits": {"chat": "2/minute"}}
    )
    with serving(create_app(settings)) as base:
        key = new_key(base, login(base, "limits@example.com"))["key"]
        sdk = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)
        with pytest.raises(openai.APIStatusError) as large:
            sdk.chat.completions.create(
                model="research", messages=[{"role": "user", "content": "x" * 4096}]
            )
        assert large.value.status_code == 413 and large.value.code == "request_too_large"
        assert "2048 bytes" in large.value.message
        sdk.chat.completions.create(model="research", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError) as limited:
            sdk.chat.completions.create(
                model="research", messages=[{"role": "user", "content": "hi"}]
            )
        assert (
            limited.value.code == "rate_limit_exceeded" and limited.value.type == "rate_limit_error"
        )
        assert int(limited.value.response.headers["Retry-After"]) >= 1
        wrong = httpx.delete(f"{base}/v1/models", headers={"Authorization": f"Bearer {key}"})
        assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


async def test_a_plain_error_under_the_prefix_is_reshaped_with_its_headers() -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from teamgraph.server.http_errors import ShapedErrors
    from teamgraph.server.protocols.openai import ERROR_SHAPE

    async def outage(request: Any) -> JSONResponse:
        return JSONResponse({"detail": "database down"}, 503, headers={"Retry-After": "5"})

    routes = [Route("/v1/x", outage), Route("/api/x", outage)]
    app = ShapedErrors(Starlette(routes=routes), shapes=[ERROR_SHAPE])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        shaped, plain = await http.get("/v1/x"), await http.get("/api/x")
    assert shaped.status_code == 503 and shaped.headers["Retry-After"] == "5"
    assert shaped.json() == {
        "error": {
            "message": "database down",
            "type": "server_error",
            "param": None,
            "code": "service_unavailable",
        }
    }
    assert plain.json() == {"detail": "database down"}


async def test_a_conflict_under_the_prefix_has_openais_shape() -> None:
    from fastapi import FastAPI

    from teamgraph.errors import RunConflict
    from teamgraph.server.http_errors import install_error_handlers
    from teamgraph.server.protocols.openai import ERROR_SHAPE

    app = FastAPI()
    install_error_handlers(app, [ERROR_SHAPE])

    @app.post("/v1/busy")
    async def busy() -> None:
        raise RunConflict("the conversation's run is still running")

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        answered = await http.post("/v1/busy")
    assert answered.status_code == 409
    assert answered.json()["error"] == {
        "message": "the conversation's run is still running",
        "type": "invalid_request_error",
        "param": None,
        "code": "conflict",
    }
