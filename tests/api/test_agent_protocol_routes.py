"""The rest of the Agent Protocol's routes, driven by the official ``langgraph-sdk`` client:
runs without a thread, ``if_not_exists``, runs listed, multitask strategies, assistants
filtered, the graph and schemas Studio reads, and webhooks called (signed, retried) on a
receiver on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from teamgraph.config import Settings
from teamgraph.server.app import create_app
from teamgraph.server.protocols import langgraph_webhooks

from .conftest import SLOW_TEAM, serving
from .test_agent_protocol import sdk

ASK = {"messages": [{"role": "user", "content": "Find how Redis persists data"}]}
SECRET = "webhook-secret-for-tests"


@pytest.fixture
def base(api_settings: Settings, tmp_path: Path) -> Iterator[str]:
    teams = tmp_path / "teams"
    teams.mkdir()
    (teams / "slow.yaml").write_text(SLOW_TEAM)
    dirs = [*api_settings.teams_dirs, str(teams)]
    settings = api_settings.model_copy(update={"teams_dirs": dirs, "webhook_secret": SECRET})
    with serving(create_app(settings)) as url:
        yield url


def test_runs_without_a_thread(base: str) -> None:
    client = sdk(base, "stateless@example.com")
    values: Any = client.runs.wait(None, "assistant", input=ASK)
    assert [m["type"] for m in values["messages"]][-1] == "ai"
    parts = list(client.runs.stream(None, "assistant", input=ASK, stream_mode="values"))
    assert parts[0].event == "metadata" and parts[-1].data["messages"][-1]["type"] == "ai"
    assert client.threads.search() == []  # their threads are not listed ...
    kept: Any = client.runs.wait(None, "assistant", input=ASK, on_completion="keep")
    [listed] = client.threads.search()  # ... unless kept
    assert listed["values"]["messages"] == kept["messages"]
    run = client.runs.create(None, "assistant", input=ASK, metadata={"from": "batch"})
    assert client.runs.join(run["thread_id"], run["run_id"])["messages"][-1]["type"] == "ai"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "assistant", command={"resume": "x"})
    assert refused.value.response.status_code == 400


def test_if_not_exists_creates_the_thread_but_never_takes_anothers(base: str) -> None:
    alice, bob = sdk(base, "ine-a@example.com"), sdk(base, "ine-b@example.com")
    values: Any = alice.runs.wait("alices-thread", "assistant", input=ASK, if_not_exists="create")
    assert values["messages"][0]["content"] == ASK["messages"][0]["content"]
    assert alice.threads.get("alices-thread")["metadata"]["graph_id"] == "assistant"
    for thread, how in (("alices-thread", "create"), ("nobodys-thread", None)):
        with pytest.raises(httpx.HTTPStatusError) as missing:
            bob.runs.wait(thread, "assistant", input=ASK, if_not_exists=how)  # type: ignore[arg-type]
        assert missing.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as bad:
        alice.runs.wait("x" * 65, "assistant", input=ASK, if_not_exists="create")
    assert bad.value.response.status_code == 400 and "thread_id" in bad.value.response.text


def test_runs_are_listed_and_never_deleted(base: str) -> None:
    client = sdk(base, "list-runs@example.com")
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, "assistant", input=ASK)
    client.runs.join(thread, first["run_id"])
    second = client.runs.create(thread, "assistant", input=ASK)
    client.runs.join(thread, second["run_id"])
    listed = client.runs.list(thread)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    assert [r["run_id"] for r in client.runs.list(thread, limit=1, offset=1)] == [first["run_id"]]
    assert len(client.runs.list(thread, status="success")) == 2
    assert client.runs.list(thread, status="error") == []
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.delete(thread, first["run_id"])
    assert refused.value.response.status_code == 501
    assert len(client.runs.list(thread)) == 2


def test_assistants_are_filtered_and_studio_reads_graph_and_schemas(base: str) -> None:
    client = sdk(base, "assistants@example.com")
    every = client.assistants.search(limit=100)
    assert client.assistants.count() == len(every) > 3
    singles = client.assistants.search(metadata={"pattern": "single"}, limit=100)
    assert singles and {a["metadata"]["pattern"] for a in singles} == {"single"}
    assert [a["graph_id"] for a in client.assistants.search(graph_id="research")] == ["research"]
    assert [a["name"] for a in client.assistants.search(name="esear")] == [
        "research",
        "supervised-research",
    ]
    names = sorted(a["name"] for a in every)
    assert [a["name"] for a in client.assistants.search(limit=2, offset=1)] == names[1:3]
    graph = client.assistants.get_graph("research")
    ids = {node["id"] for node in graph["nodes"]}
    assert "__start__" in ids and graph["edges"]
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    schemas = client.assistants.get_schemas("research")
    assert schemas["input_schema"]["required"] == ["messages"]
    with pytest.raises(NotFoundError):
        client.assistants.get_graph("nope")


def test_multitask_strategies(base: str) -> None:
    client = sdk(base, "multitask@example.com")
    thread = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Research Redis and write it up"}]}
    first = client.runs.create(thread, "slow", input=ask)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread, "slow", input=ask)  # reject: the default
    assert refused.value.response.status_code == 409
    with pytest.raises(httpx.HTTPStatusError) as rollback:
        client.runs.create(thread, "slow", input=ask, multitask_strategy="rollback")
    assert rollback.value.response.status_code == 400
    second = client.runs.create(thread, "slow", input=ask, multitask_strategy="interrupt")
    assert client.runs.get(thread, first["run_id"])["status"] == "interrupted"  # cancelled
    third: Any = client.runs.wait(thread, "slow", input=ask, multitask_strategy="enqueue")
    assert client.runs.get(thread, second["run_id"])["status"] == "success"  # it ended first
    assert client.runs.list(thread)[0]["status"] == "success"
    assert third["messages"][-1]["type"] == "ai"


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 503 ``failures`` times, then 200."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[dict[str, str], bytes]] = []
        self.taken = threading.Event()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        self.calls.append((dict(request.headers), await request.body()))
        if len(self.calls) <= self.failures:
            return Response(status_code=503)
        self.taken.set()
        return Response(status_code=200)


def test_a_webhook_is_called_signed_and_retried(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(langgraph_webhooks, "RETRY_DELAYS", (0.0, 0.0, 0.0))
    receiver = Receiver(failures=2)
    client = sdk(base, "hooks@example.com")
    with serving(receiver.app) as hooks:
        thread = client.threads.create()["thread_id"]
        run = client.runs.create(thread, "assistant", input=ASK, webhook=f"{hooks}/hook")
        assert receiver.taken.wait(timeout=60)
    assert len(receiver.calls) == 3
    deliveries = {headers["x-teamgraph-delivery"] for headers, _ in receiver.calls}
    assert len(deliveries) == 1  # one call, tried three times
    headers, body = receiver.calls[-1]
    stamp, digest = (p.split("=", 1)[1] for p in headers["x-teamgraph-signature"].split(","))
    expected = hmac.new(SECRET.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest(digest, expected.hexdigest())
    sent = json.loads(body)
    assert sent["run_id"] == run["run_id"] and sent["status"] == "success"
    assert sent["values"]["messages"][-1]["type"] == "ai"


def test_a_webhook_needs_an_http_url_and_a_server_secret(base: str, api_settings: Settings) -> None:
    client = sdk(base, "badhook@example.com")
    thread = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread, "assistant", input=ASK, webhook="file:///etc/passwd")
    assert refused.value.response.status_code == 400 and "webhook" in refused.value.response.text
    with serving(create_app(api_settings)) as unsigned:  # no TEAMGRAPH_WEBHOOK_SECRET
        other = sdk(unsigned, "nosecret@example.com")
        thread = other.threads.create()["thread_id"]
        with pytest.raises(httpx.HTTPStatusError) as no_secret:
            other.runs.create(thread, "assistant", input=ASK, webhook="http://127.0.0.1:9/h")
        assert "TEAMGRAPH_WEBHOOK_SECRET" in no_secret.value.response.text
