"""The LangGraph Agent Protocol, driven by the official ``langgraph-sdk`` client against the
server served by uvicorn — what agent-chat-ui does: list assistants, make a thread, stream a run
in several modes, meet an interrupt, resume it with ``Command(resume=...)``, reconnect with
``Last-Event-ID``, wait for a run, and never see another user's thread."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import REPO, SLOW_TEAM, serving
from .test_openai_compat import login, new_key


@pytest.fixture
def base(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as url:
        yield url


def sdk(base: str, email: str) -> SyncLangGraphClient:
    key = new_key(base, login(base, email))["key"]
    return get_sync_client(url=f"{base}/langgraph", api_key=key)


def parts(stream: Any) -> list[tuple[str, Any]]:
    return [(p.event, p.data) for p in stream]


def test_assistants_are_the_teams(base: str) -> None:
    client = sdk(base, "a@example.com")
    names = [a["assistant_id"] for a in client.assistants.search()]
    assert {"research", "notebook", "assistant"} <= set(names)
    assert client.assistants.get("research")["graph_id"] == "research"


def test_a_streamed_run_with_an_interrupt_resumed_by_command(base: str) -> None:
    client = sdk(base, "b@example.com")
    thread = client.threads.create()["thread_id"]
    modes = ["values", "updates", "messages-tuple", "custom", "events"]
    first = parts(
        client.runs.stream(
            thread,
            "notebook",
            input={"messages": [{"role": "user", "content": "help"}]},
            stream_mode=modes,
        )
    )
    kinds = [kind for kind, _ in first]
    assert kinds[0] == "metadata" and kinds[1] == "values" and kinds[-1] == "values"
    assert {"updates", "events"} <= set(kinds)
    [interrupt] = first[-1][1]["__interrupt__"]
    assert "Could you say more" in interrupt["value"]["question"]
    assert client.threads.get(thread)["status"] == "interrupted"
    assert client.threads.get_state(thread)["interrupts"] == [interrupt]

    second = parts(
        client.runs.stream(
            thread,
            "notebook",
            command={"resume": "How Redis persists data"},
            stream_mode=["values", "messages-tuple"],
        )
    )
    tokens = "".join(data[0]["content"] for kind, data in second if kind == "messages")
    assert "append-only file" in tokens  # the answer, token by token
    final = second[-1][1]
    assert final["messages"][-1]["type"] == "ai" and "__interrupt__" not in final
    assert final["messages"][-1]["content"] == tokens
    assert client.threads.get(thread)["status"] == "idle"


def test_a_run_joined_again_after_a_disconnect_continues_after_last_event_id(base: str) -> None:
    client = sdk(base, "c@example.com")
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(
        thread,
        "research",
        input={"messages": [{"role": "user", "content": "Compare Redis and Memcached"}]},
    )
    done = client.runs.join(thread, run["run_id"])
    assert "Redis" in done["messages"][-1]["content"]
    everything = parts(
        client.runs.join_stream(thread, run["run_id"], stream_mode=["events", "custom"])
    )
    progress = "".join(data for kind, data in everything if kind == "custom")
    assert "> Plan (rules" in progress and "calls search_docs" in progress
    seqs = [data["data"]["seq"] for kind, data in everything if kind == "events"]
    assert seqs == sorted(seqs) and len(seqs) > 5
    middle = seqs[len(seqs) // 2]
    rest = parts(
        client.runs.join_stream(
            thread, run["run_id"], stream_mode=["events"], last_event_id=str(middle)
        )
    )
    assert [data["data"]["seq"] for kind, data in rest if kind == "events"] == [
        s for s in seqs if s > middle
    ]
    assert client.runs.get(thread, run["run_id"])["status"] == "success"


def test_wait_returns_the_threads_values_with_its_tool_calls(base: str) -> None:
    client = sdk(base, "d@example.com")
    thread = client.threads.create()["thread_id"]
    values = client.runs.wait(
        thread,
        "assistant",
        input={"messages": [{"role": "user", "content": "Find how Redis persists data"}]},
    )
    messages: list[dict[str, Any]] = values["messages"]  # type: ignore[index]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    [call] = messages[1]["tool_calls"]
    assert call["name"] == "search_docs" and call["args"] and call["type"] == "tool_call"
    assert messages[2]["tool_call_id"] == call["id"] and messages[2]["name"] == "search_docs"
    assert "Redis" in messages[2]["content"] and messages[2]["status"] == "success"
    assert len({m["id"] for m in messages}) == 4
    assert client.threads.get_state(thread)["values"]["messages"] == messages


def test_another_users_thread_is_not_found(base: str) -> None:
    alice, bob = sdk(base, "e@example.com"), sdk(base, "f@example.com")
    thread = alice.threads.create()["thread_id"]
    with pytest.raises(NotFoundError):
        bob.threads.get(thread)
    with pytest.raises(NotFoundError):
        list(
            bob.runs.stream(
                thread, "notebook", input={"messages": [{"role": "user", "content": "x"}]}
            )
        )
    assert [t["thread_id"] for t in bob.threads.search()] == []


def test_the_docs_client_example_runs(
    base: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (REPO / "docs" / "langgraph.md").read_text()
    [code] = re.findall(r"```python client\n(.*?)```", doc, re.DOTALL)
    monkeypatch.setenv("TEAMGRAPH_URL", base)
    monkeypatch.setenv("TEAMGRAPH_API_KEY", new_key(base, login(base, "doc@example.com"))["key"])
    exec(compile(code, "docs/langgraph.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "asked: Could you say more" in printed and "append-only file" in printed
    assert printed.rstrip().endswith("ai")


def test_a_background_run_is_cancelled_and_resumable(
    api_settings: Settings, tmp_path: Path
) -> None:
    teams = tmp_path / "teams"
    teams.mkdir()
    (teams / "slow.yaml").write_text(SLOW_TEAM)
    settings = api_settings.model_copy(update={"teams_dirs": [str(teams)]})
    with serving(create_app(settings)) as url:
        client = sdk(url, "g@example.com")
        thread = client.threads.create()["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Research Redis and write it up"}]}
        run = client.runs.create(thread, "slow", input=ask)
        client.runs.cancel(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] == "interrupted"  # resumable
        assert client.threads.get(thread)["status"] == "idle"


def history_head(client: SyncLangGraphClient, thread: str) -> dict[str, Any]:
    """What ``useStream`` reads once a stream ends: the newest state of the thread's history."""
    head: dict[str, Any] = client.threads.get_history(thread, limit=10)[0]  # type: ignore[assignment]
    return head


def test_a_question_is_an_interrupt_in_the_history_and_its_messages(base: str) -> None:
    client = sdk(base, "q@example.com")
    thread = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "help"}]}
    client.runs.wait(thread, "notebook", input=ask)
    head = history_head(client, thread)
    assert head["next"] == ["notebook"]
    [interrupt] = head["tasks"][-1]["interrupts"]
    question = interrupt["value"]["question"]
    assert isinstance(question, str) and "Could you say more" in question
    asked = head["values"]["messages"]
    assert [m["type"] for m in asked] == ["human", "ai"] and asked[1]["content"] == question

    client.runs.wait(thread, "notebook", command={"resume": "How Redis persists data"})
    head = history_head(client, thread)
    assert head["next"] == [] and head["tasks"] == []
    kinds = [m["type"] for m in head["values"]["messages"]]
    assert kinds[:3] == ["human", "ai", "human"] and kinds[-1] == "ai"
    assert head["values"]["messages"][2]["content"] == "How Redis persists data"


def save_a_note(client: SyncLangGraphClient) -> tuple[str, dict[str, Any]]:
    """A notebook thread paused on its note: the thread and the interrupt useStream shows."""
    thread = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Save a note: Redis keeps data in memory"}]}
    client.runs.wait(thread, "notebook", input=ask)
    head = history_head(client, thread)
    assert head["next"] == ["notebook"] and client.threads.get(thread)["status"] == "interrupted"
    [interrupt] = head["tasks"][-1]["interrupts"]
    return thread, interrupt


def test_an_approval_is_langchains_human_in_the_loop_request(base: str) -> None:
    client = sdk(base, "h@example.com")
    thread, interrupt = save_a_note(client)
    [action] = interrupt["value"]["action_requests"]
    assert action["name"] == "save_note" and action["args"] and action["description"]
    [config] = interrupt["value"]["review_configs"]
    assert config["action_name"] == "save_note"
    assert config["allowed_decisions"] == ["approve", "edit", "reject"]
    [*_, ai] = history_head(client, thread)["values"]["messages"]
    assert ai["tool_calls"][0]["name"] == "save_note"  # the call waiting, shown as a card
    assert ai["tool_calls"][0]["args"] == action["args"]


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, "saved note"),
        ({"type": "reject", "message": "not now"}, "rejected"),
        ({"type": "edit", "edited_action": {"name": "save_note", "args": {}}}, "saved note"),
    ],
)
def test_decisions_resume_an_approval(base: str, decision: dict[str, Any], expected: str) -> None:
    client = sdk(base, f"{decision['type']}@example.com")
    thread, interrupt = save_a_note(client)
    if decision["type"] == "edit":
        args = dict(interrupt["value"]["action_requests"][0]["args"])
        decision["edited_action"]["args"] = {**args, "text": "Edited: Redis persists with AOF"}
    client.runs.wait(thread, "notebook", command={"resume": {"decisions": [decision]}})
    head = history_head(client, thread)
    assert head["tasks"] == [] and client.threads.get(thread)["status"] == "idle"
    messages = head["values"]["messages"]
    [result] = [m for m in messages if m["type"] == "tool"]
    [call] = next(m for m in messages if m.get("tool_calls"))["tool_calls"]
    assert result["tool_call_id"] == call["id"] and expected in result["content"]
    if decision["type"] == "edit":  # the card shows the call as made
        assert call["args"]["text"] == "Edited: Redis persists with AOF"


def test_the_older_resume_shapes_still_decide(base: str) -> None:
    client = sdk(base, "old@example.com")
    thread, interrupt = save_a_note(client)
    [action] = interrupt["value"]["action_requests"]
    client.runs.wait(thread, "notebook", command={"resume": {action["id"]: {"action": "approve"}}})
    assert client.threads.get(thread)["status"] == "idle"
    thread, _ = save_a_note(client)
    client.runs.wait(thread, "notebook", command={"resume": {"action": "reject"}})
    assert client.threads.get(thread)["status"] == "idle"


def test_a_wrong_number_of_decisions_is_a_clear_error(base: str) -> None:
    client = sdk(base, "bad@example.com")
    thread, _ = save_a_note(client)
    with pytest.raises(Exception, match="decision") as raised:
        client.runs.wait(thread, "notebook", command={"resume": {"decisions": []}})
    assert "resume.decisions" in str(raised.value.response.text)  # type: ignore[attr-defined]
    assert client.threads.get(thread)["status"] == "interrupted"


def test_info_answers_like_a_langgraph_server_without_credentials(base: str) -> None:
    answer = httpx.get(f"{base}/langgraph/info")
    assert answer.status_code == 200 and answer.json()["version"]
    assert answer.json()["flags"]["assistants"] is True


def test_cors_lets_a_browser_read_content_location(api_settings: Settings) -> None:
    ui = "http://localhost:3000"
    settings = api_settings.model_copy(update={"cors_origins": [ui]})
    with serving(create_app(settings)) as url:
        key = new_key(url, login(url, "cors@example.com"))["key"]
        headers = {"x-api-key": key, "Origin": ui}
        thread = httpx.post(f"{url}/langgraph/threads", json={}, headers=headers).json()
        body = {
            "assistant_id": "research",
            "input": {"messages": [{"role": "user", "content": "x"}]},
        }
        answer = httpx.post(
            f"{url}/langgraph/threads/{thread['thread_id']}/runs/wait", json=body, headers=headers
        )
        run = httpx.post(
            f"{url}/langgraph/threads/{thread['thread_id']}/runs/stream", json=body, headers=headers
        )
    assert answer.status_code == 200
    exposed = run.headers["access-control-expose-headers"]
    assert "Content-Location" in exposed and "/runs/" in run.headers["content-location"]


def test_each_stream_part_has_its_own_id_and_a_reconnect_skips_none(base: str) -> None:
    client = sdk(base, "ids@example.com")
    thread = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Compare Redis and Memcached"}]}
    run = client.runs.create(thread, "research", input=ask)
    client.runs.join(thread, run["run_id"])
    modes = ["events", "custom", "updates", "values", "messages-tuple"]
    whole = list(client.runs.join_stream(thread, run["run_id"], stream_mode=modes))
    ids = [p.id for p in whole if p.id is not None]
    assert len(ids) == len(set(ids)) and len(ids) > 10
    shared = [p.id for p in whole if p.id and not p.id.endswith(":0")]  # a later part of an event
    for cut in (shared[len(shared) // 2], ids[-2]):
        rest = list(
            client.runs.join_stream(thread, run["run_id"], stream_mode=modes, last_event_id=cut)
        )
        after = [(p.event, p.data, p.id) for p in whole[[p.id for p in whole].index(cut) + 1 :]]
        assert [(p.event, p.data, p.id) for p in rest] == after


def test_threads_keep_their_metadata_and_search_lists_only_the_protocols_own(base: str) -> None:
    client = sdk(base, "list@example.com")
    ask = {"messages": [{"role": "user", "content": "Find how Redis persists data"}]}
    made = client.threads.create(metadata={"user_tag": "blue"})
    assert made["metadata"] == {"user_tag": "blue"}
    client.runs.wait(made["thread_id"], "assistant", input=ask)
    meta = client.threads.get(made["thread_id"])["metadata"]
    assert meta == {"user_tag": "blue", "graph_id": "assistant", "assistant_id": "assistant"}
    research = [client.threads.create()["thread_id"] for _ in range(3)]
    for thread in research:
        client.runs.create(thread, "research", input=ask)
    idle = client.threads.create()["thread_id"]  # never ran: no graph_id
    chat = {"model": "assistant", "messages": [{"role": "user", "content": "hello"}]}
    key = client.http.client.headers["x-api-key"]
    opened = httpx.post(f"{base}/v1/chat/completions", json=chat, headers={"x-api-key": key})
    assert opened.status_code == 200  # an OpenAI-route session: never a thread listed here

    listed = [t["thread_id"] for t in client.threads.search(limit=100)]
    assert set(listed) == {made["thread_id"], *research, idle}
    assert [t["thread_id"] for t in client.threads.search(metadata={"graph_id": "assistant"})] == [
        made["thread_id"]
    ]
    by_team = client.threads.search(metadata={"graph_id": "research"}, limit=100)
    assert {t["thread_id"] for t in by_team} == set(research)
    pages = [
        t["thread_id"]
        for offset in (0, 2)
        for t in client.threads.search(metadata={"graph_id": "research"}, limit=2, offset=offset)
    ]
    assert sorted(pages) == sorted(research)
    assert client.threads.search(metadata={"user_tag": "blue"})[0]["thread_id"] == made["thread_id"]
    assert client.threads.count(metadata={"graph_id": "research"}) == 3


def test_search_by_status_and_thread_update_copy_delete(base: str) -> None:
    client = sdk(base, "manage@example.com")
    paused = client.threads.create()["thread_id"]
    client.runs.wait(paused, "notebook", input={"messages": [{"role": "user", "content": "help"}]})
    done = client.threads.create()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Find how Redis persists data"}]}
    client.runs.wait(done, "assistant", input=ask)
    assert [t["thread_id"] for t in client.threads.search(status="interrupted")] == [paused]
    assert [t["thread_id"] for t in client.threads.search(status="idle")] == [done]
    assert client.threads.count(status="interrupted") == 1

    updated = client.threads.update(done, metadata={"starred": True})
    assert updated["metadata"]["starred"] is True and updated["metadata"]["graph_id"] == "assistant"
    copy = client.threads.copy(done)
    assert copy["thread_id"] != done and copy["metadata"]["starred"] is True
    original = client.threads.get_state(done)["values"]["messages"]
    copied = client.threads.get_state(copy["thread_id"])["values"]["messages"]
    assert [(m["type"], m["content"]) for m in copied] == [
        (m["type"], m["content"]) for m in original
    ]
    client.threads.delete(done)
    with pytest.raises(NotFoundError):
        client.threads.get(done)
    assert client.threads.get(copy["thread_id"])["status"] == "idle"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.update_state(paused, {"messages": []})
    assert refused.value.response.status_code == 501
    assert "not supported" in refused.value.response.json()["detail"]
    client.threads.delete(paused)  # its paused run is closed: nothing waits any more
    key = client.http.client.headers["x-api-key"]
    assert httpx.get(f"{base}/api/v1/pending", headers={"x-api-key": key}).json() == []
