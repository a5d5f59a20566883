"""The runs API: start, follow over SSE (with replay), inspect, cancel, pause and resume — always
scoped to the run's owner."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.tools import tool
from sqlalchemy import Select

from teamgraph.config import Settings
from teamgraph.events import AgentMessage
from teamgraph.runtime.event_log import (
    FLUSH_INTERVAL,
    EventLog,
    EventWriter,
    one_by_one,
    replay,
)
from teamgraph.runtime.team_api import Team
from teamgraph.server import repositories as repo
from teamgraph.server.app import create_app
from teamgraph.server.state import AppState
from teamgraph.storage.run_store import ROW_RESERVE

from ..faultkit import LockedOnce
from ..helpers import CEILING_S, eventually
from .conftest import User, make_session

API = "/api/v1"
REQUEST = "Compare PostgreSQL and MongoDB on security"
deleted: list[str] = []


@tool
def delete_record(record_id: str) -> str:
    """Delete a record from the records database."""
    deleted.append(record_id)
    return f"deleted {record_id}"


def serve(app: FastAPI, spec: dict[str, Any], **options: Any) -> str:
    """Serve one more team (built on the app's settings); returns its name."""
    state: AppState = app.state.teamgraph
    team = Team.from_dict(spec, settings=state.settings, **options)
    state.teams[team.spec.name] = team
    return team.spec.name


async def start(client: httpx.AsyncClient, user: User, session_id: str, text: str) -> str:
    response = await client.post(
        f"{API}/sessions/{session_id}/runs", json={"input": text}, headers=user.headers
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


async def sse(
    client: httpx.AsyncClient, user: User, run_id: str, last_id: int | None = None, **params: Any
) -> list[dict[str, Any]]:
    """The stream's events as ``{"id", "event", "data"}``, parsed line by line."""
    headers = {**user.headers, **({"Last-Event-ID": str(last_id)} if last_id is not None else {})}
    url = f"{API}/runs/{run_id}/events"
    events: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    async with client.stream("GET", url, headers=headers, params=params) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith(":"):  # a comment (keep-alive ping)
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
                continue
            if "data" in fields:
                data = json.loads(fields["data"])
                events.append({"id": int(fields["id"]), "event": fields["event"], "data": data})
            fields = {}
    return events


async def progressed(app: FastAPI, run_id: str) -> None:
    """Wait for the run's first model call: a run stopped before LangGraph's first checkpoint
    cannot resume (reported to the runner's owner)."""
    store = app.state.teamgraph.backend.runs

    async def called() -> bool:
        return any([e async for e in _stored(store, run_id, 0) if e.type == "usage"])

    await eventually(called, f"run {run_id} makes its first model call")


async def messages(app: FastAPI, session_id: str) -> list[tuple[str, str]]:
    async with app.state.teamgraph.sessions() as db:
        return [(m.role, m.content) for m in await repo.messages(db, session_id)]


async def test_a_run_streams_to_its_end_and_replays_from_any_point(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    events = await sse(client, alice, run_id)
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids)) and ids[0] == 1
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    assert all(e["data"]["seq"] == e["id"] and e["data"]["type"] == e["event"] for e in events)
    assert {"plan_created", "step_started", "step_completed", "token"} <= {
        e["event"] for e in events
    }
    middle = ids[len(ids) // 2]
    rest = [e for e in events if e["id"] > middle]
    assert await sse(client, alice, run_id, last_id=middle) == rest
    assert await sse(client, alice, run_id, after=middle) == rest
    assert await sse(client, alice, run_id, last_id=middle, after=0) == rest  # the header wins
    assert await sse(client, alice, run_id) == events  # a finished run replays in full

    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert (run["status"], run["team"], run["pattern"]) == ("completed", "research", "workflow")
    assert run["session_id"] == sid and run["thread_id"] == sid and run["input"] == REQUEST
    assert run["planner_tier"] == "rules" and run["plan"]["steps"]
    assert [s["status"] for s in run["steps"]] == ["done"] * len(run["plan"]["steps"])
    assert run["usage"]["input_tokens"] > 0 and run["usage_by_agent"]
    assert run["finished_at"] and run["created_at"] and run["error"] is None
    listed = (await client.get(f"{API}/sessions/{sid}/runs", headers=alice.headers)).json()
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "completed")]
    output = events[-1]["data"]["output"]
    assert await messages(app, sid) == [("user", REQUEST), ("assistant", output)]


async def test_cancel_stops_a_run_which_can_resume_later(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    slow = {"name": "slow", "model_kwargs": {"latency": 0.3}, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, slow)))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    busy = await client.post(
        f"{API}/sessions/{sid}/runs", json={"input": "another"}, headers=alice.headers
    )
    assert busy.status_code == 409  # one run at a time per session (it is one thread)
    await progressed(app, run_id)
    cancelled = await client.post(f"{API}/runs/{run_id}/cancel", headers=alice.headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    events = await sse(client, alice, run_id)
    assert events[-1]["event"] == "run_cancelled"
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "cancelled"
    again = await client.post(f"{API}/runs/{run_id}/cancel", headers=alice.headers)
    assert again.status_code == 409

    resumed = await client.post(f"{API}/runs/{run_id}/resume", headers=alice.headers)
    assert resumed.status_code == 202
    more = await sse(client, alice, run_id, last_id=events[-1]["id"])
    assert more[0]["event"] == "resumed" and more[-1]["event"] == "run_completed"
    assert more[0]["id"] > events[-1]["id"]
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "completed"


async def test_a_clarification_pauses_the_run_until_answered(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    desk = {"name": "desk", "clarify": True, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, desk)))["session_id"]
    run_id = await start(client, alice, sid, "help")
    events = await sse(client, alice, run_id)
    assert events[-1]["event"] == "clarification_requested"  # the stream ends at the pause
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "interrupted"
    pending = (await client.get(f"{API}/runs/{run_id}/pending", headers=alice.headers)).json()
    assert [(p["type"], p["run_id"]) for p in pending] == [("clarification", run_id)]
    assert pending[0]["question"] == events[-1]["data"]["question"]
    assert (await client.get(f"{API}/pending", headers=alice.headers)).json() == pending
    blocked = await client.post(
        f"{API}/sessions/{sid}/runs", json={"input": "something else"}, headers=alice.headers
    )
    assert blocked.status_code == 409 and "paused" in blocked.text
    unanswered = await client.post(f"{API}/runs/{run_id}/resume", json={}, headers=alice.headers)
    assert unanswered.status_code == 400 and "answer" in unanswered.text

    answer = "compare PostgreSQL and MongoDB security"
    resumed = await client.post(
        f"{API}/runs/{run_id}/resume", json={"answer": answer}, headers=alice.headers
    )
    assert resumed.status_code == 202
    more = await sse(client, alice, run_id, last_id=events[-1]["id"])
    assert more[0]["event"] == "resumed" and more[-1]["event"] == "run_completed"
    assert await sse(client, alice, run_id) == events + more
    assert (await client.get(f"{API}/runs/{run_id}/pending", headers=alice.headers)).json() == []
    output = more[-1]["data"]["output"]
    assert await messages(app, sid) == [("user", "help"), ("user", answer), ("assistant", output)]


async def test_a_sensitive_tool_call_waits_for_approval(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    deleted.clear()
    clerks = {
        "name": "clerks",
        "members": [{"name": "clerk", "description": "keeps records", "tools": ["delete_record"]}],
    }
    sid = (await make_session(client, alice, team=serve(app, clerks, tools=[delete_record])))[
        "session_id"
    ]
    run_id = await start(client, alice, sid, "delete record 7")
    events = await sse(client, alice, run_id)
    assert events[-1]["event"] == "approval_requested" and deleted == []
    [item] = (await client.get(f"{API}/runs/{run_id}/pending", headers=alice.headers)).json()
    assert (item["type"], item["tool"]) == ("approval", "delete_record")
    assert item["request_id"] == events[-1]["data"]["request_id"]
    bad = {"decisions": {item["request_id"]: {"action": "maybe"}}}
    invalid = await client.post(f"{API}/runs/{run_id}/resume", json=bad, headers=alice.headers)
    assert invalid.status_code == 422

    approve = {"decisions": {item["request_id"]: {"action": "approve"}}}
    response = await client.post(f"{API}/runs/{run_id}/resume", json=approve, headers=alice.headers)
    assert response.status_code == 202
    more = await sse(client, alice, run_id, last_id=events[-1]["id"])
    assert more[-1]["event"] == "run_completed" and len(deleted) == 1
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "completed" and run["steps"][0]["status"] == "done"


async def test_a_paused_run_can_be_closed(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    desk = {"name": "desk", "clarify": True, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, desk)))["session_id"]
    run_id = await start(client, alice, sid, "help")
    paused = await sse(client, alice, run_id)
    closed = await client.post(f"{API}/runs/{run_id}/cancel", headers=alice.headers)
    assert closed.status_code == 200 and closed.json()["status"] == "cancelled"
    [last] = await sse(client, alice, run_id, last_id=paused[-1]["id"])
    assert (last["event"], last["id"]) == ("run_cancelled", paused[-1]["id"] + 1)
    assert (await client.get(f"{API}/pending", headers=alice.headers)).json() == []
    second = await start(client, alice, sid, REQUEST)  # the session is free again
    assert (await sse(client, alice, second))[-1]["event"] == "run_completed"
    superseded = await client.post(
        f"{API}/runs/{run_id}/resume", json={"answer": "x"}, headers=alice.headers
    )
    assert superseded.status_code == 409 and "superseded" in superseded.text


async def test_another_users_runs_are_404_on_every_route(
    client: httpx.AsyncClient, app: FastAPI, alice: User, bob: User
) -> None:
    desk = {"name": "desk", "clarify": True, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, desk)))["session_id"]
    run_id = await start(client, alice, sid, "help")
    await sse(client, alice, run_id)
    for method, path, body in [
        ("GET", f"{API}/runs/{run_id}", None),
        ("GET", f"{API}/runs/{run_id}/events", None),
        ("POST", f"{API}/runs/{run_id}/cancel", None),
        ("POST", f"{API}/runs/{run_id}/resume", {"answer": "mine now"}),
        ("GET", f"{API}/runs/{run_id}/pending", None),
        ("GET", f"{API}/sessions/{sid}/runs", None),
        ("POST", f"{API}/sessions/{sid}/runs", {"input": "hello"}),
        ("GET", f"{API}/runs/does-not-exist", None),
    ]:
        response = await client.request(method, path, json=body, headers=bob.headers)
        assert response.status_code == 404, (method, path, response.text)
    assert (await client.get(f"{API}/pending", headers=bob.headers)).json() == []
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "interrupted"  # untouched
    assert len((await client.get(f"{API}/pending", headers=alice.headers)).json()) == 1


async def test_bodies_and_headers_are_validated(client: httpx.AsyncClient, alice: User) -> None:
    sid = (await make_session(client, alice, team="research"))["session_id"]
    url = f"{API}/sessions/{sid}/runs"
    for body in (
        {"input": ""},
        {"input": "   "},
        {"input": "x" * 20001},
        {"input": "hi", "options": {"turbo": True}},
        {"input": "hi", "unknown": 1},
    ):
        response = await client.post(url, json=body, headers=alice.headers)
        assert response.status_code == 422, body
    assert (await client.post(url, json={"input": "hi"})).status_code == 401
    run_id = await start(client, alice, sid, REQUEST)
    bad_id = await client.get(
        f"{API}/runs/{run_id}/events", headers={**alice.headers, "Last-Event-ID": "abc"}
    )
    assert bad_id.status_code == 422


async def test_readers_joining_a_live_run_miss_nothing_and_see_nothing_twice(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    slow = {"name": "slow", "model_kwargs": {"latency": 0.1}, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, slow)))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)

    async def join(delay: float, last_id: int | None = None) -> list[dict[str, Any]]:
        await asyncio.sleep(delay)
        return await sse(client, alice, run_id, last_id=last_id)

    readers = [join(0), join(0.05), join(0.15, last_id=2), join(0.3), join(0.45, last_id=5)]
    seen = await asyncio.gather(*readers)
    full = await sse(client, alice, run_id)
    assert [e["id"] for e in full] == list(range(1, len(full) + 1))  # one execution: no gaps
    assert full[-1]["event"] == "run_completed"
    for events, after in zip(seen, [0, 0, 2, 0, 5], strict=True):
        assert events == [e for e in full if e["id"] > after]


async def test_shutdown_cancels_running_runs_which_resume_in_the_next_process(
    client: httpx.AsyncClient, app: FastAPI, alice: User, api_settings: Settings
) -> None:
    slow = {"name": "slow", "model_kwargs": {"latency": 0.3}, "members": ["researcher", "writer"]}
    serve(app, slow)
    sid = (await make_session(client, alice, team="slow"))["session_id"]
    second = create_app(api_settings)  # another process on the same database
    async with second.router.lifespan_context(second):
        serve(second, slow)
        transport = httpx.ASGITransport(app=second)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as other:
            run_id = await start(other, alice, sid, REQUEST)
            await progressed(second, run_id)
    events = await sse(client, alice, run_id)  # the first process replays what the second did
    assert events[-1]["event"] == "run_cancelled"
    assert (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()[
        "status"
    ] == "cancelled"
    resumed = await client.post(f"{API}/runs/{run_id}/resume", headers=alice.headers)
    assert resumed.status_code == 202
    more = await sse(client, alice, run_id, last_id=events[-1]["id"])
    assert more[0]["event"] == "resumed" and more[-1]["event"] == "run_completed", more[-1]


async def test_the_log_merges_stored_unstored_and_coming_events(app: FastAPI) -> None:
    store = app.state.teamgraph.backend.runs
    for n, pause in enumerate((0.0, 0.01, 0.03, 0.06)):
        run_id = f"log-{n}"

        def message(seq: int, run_id: str = run_id) -> AgentMessage:  # batched, not urgent
            return AgentMessage(run_id=run_id, seq=seq, agent="a", content=f"m{seq}")

        writer = EventWriter(app.state.teamgraph.backend.runs)
        log = EventLog(writer)
        for seq in (1, 2, 3):
            log.add(message(seq))

        async def stored(run_id: str = run_id) -> bool:
            return await _collect(_stored(store, run_id, 0)) == [1, 2, 3]

        await eventually(stored, "events 1-3 are stored")
        for seq in (4, 5, 6):
            log.add(message(seq))  # not stored yet
        reader = asyncio.create_task(_collect(one_by_one(replay(store, run_id, 1, log))))
        await asyncio.sleep(pause)  # the batch of 4-6 is written before, while or after reading
        for seq in (7, 8):
            log.add(message(seq))
        await log.close()
        log.end()
        assert await reader == [2, 3, 4, 5, 6, 7, 8], pause
        assert await _collect(_stored(store, run_id, 0)) == list(range(1, 9))
        assert not log.subscribers


async def test_a_reader_gets_the_events_ready_together_as_one_batch(app: FastAPI) -> None:
    store = app.state.teamgraph.backend.runs
    log = EventLog(EventWriter(store))

    def message(seq: int) -> AgentMessage:
        return AgentMessage(run_id="together", seq=seq, agent="a", content=f"m{seq}")

    for seq in (1, 2, 3):
        log.add(message(seq))
    batches = replay(store, "together", 0, log)
    assert [e.seq for e in await anext(batches)] == [1, 2, 3]  # in memory: one write
    for seq in (4, 5, 6):
        log.add(message(seq))  # emitted in one go
    assert [e.seq for e in await anext(batches)] == [4, 5, 6]
    log.add(message(7))
    log.end()
    assert [e.seq for e in await anext(batches)] == [7]
    with pytest.raises(StopAsyncIteration):
        await anext(batches)
    await log.close()


def _target(statement: Any) -> str:
    """The table a statement writes (``events`` for PostgreSQL's one statement that stores
    events and notifies), or ``notify`` for a NOTIFY alone."""
    table = getattr(statement, "table", None)
    if table is not None:
        return str(table.name)
    return "events" if "INSERT INTO events" in str(statement) else "notify"


class _Writes:
    """A connection that notes the table each write goes to (reads pass)."""

    def __init__(self, conn: Any, written: list[str]) -> None:
        self.conn, self.written, self.dialect = conn, written, conn.dialect

    def execute(self, statement: Any, parameters: Any = None) -> Any:
        if not isinstance(statement, Select):
            self.written.append(_target(statement))
        return self.conn.execute(statement, parameters)


class HeldWrites:
    """The run store's event writes, held back while ``free`` is clear: events stay unstored."""

    def __init__(self, app: FastAPI) -> None:
        self.store = app.state.teamgraph.backend.runs
        self.free = asyncio.Event()
        self.free.set()

    async def append(self, events: Any, *also: Any, ends: Any = None) -> None:
        await self.free.wait()
        await self.store.append(events, *also, ends=ends)


async def test_readers_get_unstored_events_from_memory_and_older_ones_from_the_database(
    app: FastAPI, monkeypatch: Any
) -> None:
    store = app.state.teamgraph.backend.runs
    monkeypatch.setattr(EventLog, "KEEP", 2)  # stored events leave memory quickly
    writes = HeldWrites(app)
    log = EventLog(EventWriter(writes))  # type: ignore[arg-type]

    def message(seq: int) -> AgentMessage:
        return AgentMessage(run_id="held", seq=seq, agent="a", content=f"m{seq}")

    for seq in range(1, 6):
        log.add(message(seq))
    await log.close()  # all stored; the last two stay in memory
    assert (log.floor, [e.seq for e in log.events]) == (3, [4, 5])
    writes.free.clear()
    for seq in (6, 7):
        log.add(message(seq))  # emitted, not stored: the writes are held
    await asyncio.sleep(FLUSH_INTERVAL * 2)
    assert await _collect(_stored(store, "held", 0)) == [1, 2, 3, 4, 5]

    # Last-Event-ID below the floor, between the floor and the last stored event, after it
    readers = {
        after: asyncio.create_task(_collect(one_by_one(replay(store, "held", after, log))))
        for after in range(8)
    }
    await asyncio.sleep(0.05)
    assert not any(reader.done() for reader in readers.values())  # live: the streams stay open
    log.add(message(8))  # a coming event
    log.end()
    for after, reader in readers.items():
        assert await reader == list(range(after + 1, 9)), after
    writes.free.set()
    await log.close()
    assert await _collect(_stored(store, "held", 0)) == list(range(1, 9))


async def test_a_run_is_accepted_in_one_write_and_streams_before_its_events_are_stored(
    client: httpx.AsyncClient, app: FastAPI, alice: User, monkeypatch: Any
) -> None:
    backend = app.state.teamgraph.backend
    manager = app.state.teamgraph.runs
    writes = HeldWrites(app)
    transactions: list[list[str]] = []

    direct_run, direct_transaction = backend.direct.run, backend.direct.transaction

    async def run(statements: Any) -> None:
        transactions.append([_target(statement) for statement, _ in statements])
        await direct_run(statements)

    async def transaction(operation: Any) -> Any:  # the writes a transaction's function makes
        written: list[str] = []
        transactions.append(written)
        return await direct_transaction(lambda conn: operation(_Writes(conn, written)))

    monkeypatch.setattr(manager._writer, "store", writes)  # the events' writes are held
    monkeypatch.setattr(backend.direct, "run", run)
    monkeypatch.setattr(backend.direct, "transaction", transaction)
    slow = {"name": "slow", "model_kwargs": {"latency": 0.2}, "members": ["researcher", "writer"]}
    sid = (await make_session(client, alice, team=serve(app, slow)))["session_id"]
    writes.free.clear()
    try:
        await _accepted_then_streamed(client, app, alice, sid, transactions, writes)
    finally:
        writes.free.set()  # a failed check must not leave the run's writes held


async def _accepted_then_streamed(
    client: httpx.AsyncClient,
    app: FastAPI,
    alice: User,
    sid: str,
    transactions: list[list[str]],
    writes: HeldWrites,
) -> None:
    backend, manager = app.state.teamgraph.backend, app.state.teamgraph.runs
    run_id = await start(client, alice, sid, REQUEST)
    assert transactions == [["runs", "messages"]]  # one transaction, before the 202
    row = await backend.runs.get(run_id)
    assert (row.session_id, row.status, row.last_seq) == (sid, "running", ROW_RESERVE)  # reserved
    assert row.user_id and await messages(app, sid) == [("user", REQUEST)]

    events = manager.events(run_id, 0)  # what the SSE route streams
    first = await anext(events)
    assert (first.type, first.seq) == ("run_started", 1)
    assert await _collect(_stored(backend.runs, run_id, 0)) == []  # served from memory
    await events.aclose()
    writes.free.set()
    events = await sse(client, alice, run_id)
    assert events[-1]["event"] == "run_completed"
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert [e.seq async for e in _stored(backend.runs, run_id, 0)] == [e["id"] for e in events]
    output = events[-1]["data"]["output"]
    assert output and await messages(app, sid) == [("user", REQUEST), ("assistant", output)]
    assert transactions[-1][:3] == ["runs", "events", "messages"]  # status, events, answer


def _stored(store: Any, run_id: str, after: int) -> Any:
    return store.events(run_id, after)


async def _collect(events: AsyncIterator[Any]) -> list[int]:
    return [event.seq async for event in events]


async def test_shared_notes_are_per_user_on_the_server(
    client: httpx.AsyncClient, alice: User, bob: User, app: Any
) -> None:
    """Runs through the server namespace save_note/search_notes by the run's user."""
    from teamgraph.runtime.team_api import Team
    from teamgraph.testing import ScriptedChatModel, ToolCall

    state = app.state.teamgraph
    spec = {
        "name": "memo",
        "pattern": "single",
        "members": [
            {"name": "scribe", "description": "takes notes", "tools": ["save_note", "search_notes"]}
        ],
    }
    saver = ScriptedChatModel(
        responses=[ToolCall("save_note", {"text": "alice secret blue"}), "saved"]
    )
    state.teams["memo"] = Team.from_dict(spec, settings=state.settings, model=saver)
    alice_session = await make_session(client, alice, team="memo")
    started = await client.post(
        f"/api/v1/sessions/{alice_session['session_id']}/runs",
        json={"input": "remember"},
        headers=alice.headers,
    )
    await _drain(client, started.json()["run_id"], alice)
    searcher = ScriptedChatModel(
        responses=[ToolCall("search_notes", {"query": "secret blue"}), lambda m: str(m[-1].content)]
    )
    state.teams["memo"] = Team.from_dict(spec, settings=state.settings, model=searcher)
    state.runs._runners.pop("memo", None)
    bob_session = await make_session(client, bob, team="memo")
    started = await client.post(
        f"/api/v1/sessions/{bob_session['session_id']}/runs",
        json={"input": "recall"},
        headers=bob.headers,
    )
    await _drain(client, started.json()["run_id"], bob)
    run = (await client.get(f"/api/v1/runs/{started.json()['run_id']}", headers=bob.headers)).json()
    assert "No notes matched" in run["output"]


async def _drain(client: httpx.AsyncClient, run_id: str, user: User) -> None:
    async with client.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers=user.headers
    ) as events:
        async for _ in events.aiter_lines():
            pass


async def test_a_run_that_cannot_prepare_fails_with_the_reason_in_its_stream(
    client: httpx.AsyncClient, alice: User, app: FastAPI, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nPostgreSQL keeps data safe.\n")
    serve(app, {"name": "docs", "members": ["researcher"], "knowledge": [str(notes)]})
    notes.unlink()  # gone after the team was loaded: found out once the run is accepted
    sid = (await make_session(client, alice, team="docs"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    events = await sse(client, alice, run_id)
    assert [e["event"] for e in events] == ["run_started", "run_failed"]
    assert str(notes) in events[-1]["data"]["error"]
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "failed" and str(notes) in run["error"]


async def test_a_writer_stopped_mid_write_never_leaves_close_waiting(
    app: FastAPI, monkeypatch: Any
) -> None:
    store = app.state.teamgraph.backend.runs
    calls = 0
    real_append = store.append

    async def append_once_cancelled(events: Any, ends: Any = None) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise asyncio.CancelledError  # the writer task dies in the middle of a write
        await real_append(events, ends=ends)

    monkeypatch.setattr(store, "append", append_once_cancelled)
    writer = EventWriter(store)
    first, second = EventLog(writer), EventLog(writer)
    first.add(AgentMessage(run_id="cut", seq=1, agent="a", content="lost"))
    await asyncio.wait_for(first.close(), CEILING_S)  # the batch counts as handled: close returns
    second.add(AgentMessage(run_id="kept", seq=1, agent="a", content="kept"))
    await asyncio.wait_for(second.close(), CEILING_S)  # a new writer task takes the next batch
    assert await _collect(_stored(store, "kept", 0)) == [1]
    assert await _collect(_stored(store, "cut", 0)) == []


async def test_a_run_an_outage_stopped_is_resumed_by_the_server_and_its_stream_goes_on(
    client: httpx.AsyncClient, app: FastAPI, alice: User
) -> None:
    journal = app.state.teamgraph.backend.journal
    if not hasattr(journal, "lanes"):
        pytest.skip("the outage is made by locking the SQLite journal's lanes")
    journal.lanes = LockedOnce(journal.lanes, n=5)  # locked past its timeout, once, mid-run
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    events = await sse(client, alice, run_id)  # one stream, through the stop and the resume
    kinds = [e["event"] for e in events]
    assert journal.lanes.calls >= 5 and "resumed" in kinds  # it did stop, and went on
    assert kinds[-1] == "run_completed" and "run_failed" not in kinds
    stored = [e.seq async for e in _stored(app.state.teamgraph.backend.runs, run_id, 0)]
    assert [e["id"] for e in events] == stored  # every stored event, once, in order
    finished = [e["data"]["step_id"] for e in events if e["event"] == "step_completed"]
    assert len(finished) == len(set(finished))  # no finished step ran again
    run = (await client.get(f"{API}/runs/{run_id}", headers=alice.headers)).json()
    assert run["status"] == "completed"


async def test_a_run_let_go_while_it_waits_out_an_outage_is_not_resumed_here(
    client: httpx.AsyncClient, app: FastAPI, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose lease on a run was taken over while an outage had stopped the run lets
    it go: the resume it had planned for when the database answers never happens here (the
    worker holding the lease resumes it), and nothing more of the run is written."""
    state = app.state.teamgraph
    journal, store, manager = state.backend.journal, state.backend.runs, state.runs
    if not hasattr(journal, "lanes"):
        pytest.skip("the outage is made by locking the SQLite journal's lanes")
    journal.lanes = LockedOnce(journal.lanes, n=5)  # locked past its timeout, once, mid-run
    answering, real_get = asyncio.Event(), store.get

    async def get(run_id: str) -> Any:  # the database answers once the test says so
        if run_id in manager._recovering:
            await answering.wait()
        return await real_get(run_id)

    monkeypatch.setattr(store, "get", get)
    sid = (await make_session(client, alice, team="research"))["session_id"]
    run_id = await start(client, alice, sid, REQUEST)
    await eventually(lambda: run_id in manager._recovering, "the outage stops the run")
    stored = [e.seq async for e in _stored(store, run_id, 0)]
    await asyncio.wait_for(manager.let_go(run_id), CEILING_S)
    answering.set()
    for _ in range(50):
        await asyncio.sleep(0)
    assert run_id not in manager._recovering and manager.owner(run_id) is None
    assert (await real_get(run_id)).status == "running"  # left for the lease holder to resume
    assert [e.seq async for e in _stored(store, run_id, 0)] == stored
