"""AG-UI: ``POST /agui/{team}`` answers a ``RunAgentInput`` with AG-UI events. The request bodies
are what ``@ag-ui/client`` 1.0.0's ``HttpAgent`` sent in a session against this server (the JS
client itself needs the npm registry, which tests may not reach); every event is parsed with
the ``ag-ui-protocol`` package's types and checked against the protocol's ordering rules."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import REPO, User, serving
from .test_openai_compat import login, new_key

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def body(thread: str, text: str | None = "help", **more: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` as the JS client sends it."""
    messages = [{"id": "m1", "role": "user", "content": text}] if text else []
    return {
        "threadId": thread,
        "runId": str(uuid.uuid4()),
        "protocolVersion": "1.0",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **more,
    }


async def run(client: httpx.AsyncClient, user: User, team: str, data: dict[str, Any]) -> list[Any]:
    response = await client.post(f"/agui/{team}", json=data, headers=user.headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        EVENTS.validate_json(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    check_order(events, data)
    return events


def check_order(events: list[Any], data: dict[str, Any]) -> None:
    """RUN_STARTED first with the input's ids, RUN_FINISHED or RUN_ERROR last; text messages
    and tool calls open, fill and close in order; state deltas apply to the last snapshot."""
    first, last = events[0], events[-1]
    assert first.type == "RUN_STARTED"
    assert (first.thread_id, first.run_id) == (data["threadId"], data["runId"])
    assert last.type in ("RUN_FINISHED", "RUN_ERROR")
    order = Order()
    for event in events[1:-1]:
        assert event.type not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR")
        getattr(order, event.type.value.lower(), lambda _: None)(event)
    assert order.text is None


@dataclass
class Order:
    """What is open so far, and the state the snapshots and deltas make."""

    text: str | None = None
    calls: set[str] = field(default_factory=set)
    state: dict[str, Any] = field(default_factory=dict)

    def text_message_start(self, event: Any) -> None:
        assert self.text is None
        self.text = event.message_id

    def text_message_content(self, event: Any) -> None:
        assert event.message_id == self.text and event.delta

    def text_message_end(self, event: Any) -> None:
        assert event.message_id == self.text
        self.text = None

    def tool_call_start(self, event: Any) -> None:
        assert self.text is None  # a text message is closed before a tool call
        self.calls.add(event.tool_call_id)

    def tool_call_args(self, event: Any) -> None:
        assert event.tool_call_id in self.calls
        json.loads(event.delta)

    def tool_call_end(self, event: Any) -> None:
        assert event.tool_call_id in self.calls

    def state_snapshot(self, event: Any) -> None:
        self.state = json.loads(json.dumps(event.snapshot))

    def state_delta(self, event: Any) -> None:
        for op in patch(event):
            assert op["op"] == "replace"
            *parents, leaf = op["path"].strip("/").split("/")
            target: Any = self.state
            for key in parents:
                target = target[int(key) if key.isdigit() else key]
            target[int(leaf) if leaf.isdigit() else leaf] = op["value"]


def patch(event: Any) -> list[dict[str, Any]]:
    """A STATE_DELTA's JSON Patch operations, as JSON."""
    return [op if isinstance(op, dict) else op.model_dump(by_alias=True) for op in event.delta]


def of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def test_a_workflow_run_as_agui_events(client: httpx.AsyncClient, alice: User) -> None:
    data = body("t-research", "Compare PostgreSQL and MongoDB on cost")
    events = await run(client, alice, "research", data)
    [plan] = [e.snapshot["plan"] for e in of(events, "STATE_SNAPSHOT") if "plan" in e.snapshot]
    assert [s["id"] for s in plan["steps"]] == ["research_cost", "summary"]
    started = [e.step_name for e in of(events, "STEP_STARTED")]
    assert (
        started
        == [e.step_name for e in of(events, "STEP_FINISHED")]
        == ["research_cost", "summary"]
    )
    deltas = [op["value"] for e in of(events, "STATE_DELTA") for op in patch(e)]
    assert deltas == ["running", "done", "running", "done"]
    assert [e.tool_call_name for e in of(events, "TOOL_CALL_START")] == ["search_docs"]
    assert "postgresql.md" in of(events, "TOOL_CALL_RESULT")[0].content
    answer = "".join(e.delta for e in of(events, "TEXT_MESSAGE_CONTENT"))
    assert "PostgreSQL" in answer and "MongoDB" in answer
    finished = events[-1]
    assert finished.outcome.type == "success" and finished.usage[0].total_tokens > 0


async def test_a_question_is_an_interrupt_and_resume_answers_it(
    client: httpx.AsyncClient, alice: User
) -> None:
    asked = await run(client, alice, "notebook", body("t-notebook"))
    outcome = asked[-1].outcome
    assert outcome.type == "interrupt" and asked[-1].usage
    [question] = outcome.interrupts
    assert question.reason == "clarification" and "Could you say more" in question.message
    entry = {"interruptId": question.id, "status": "resolved", "payload": "How Redis persists data"}
    answered = await run(client, alice, "notebook", body("t-notebook", resume=[entry]))
    assert answered[-1].outcome.type == "success"
    assert "append-only file" in "".join(e.delta for e in of(answered, "TEXT_MESSAGE_CONTENT"))


@pytest.mark.parametrize(
    ("decision", "expected"),
    [({"action": "approve"}, "saved note"), ({"action": "reject", "comment": "no"}, "rejected")],
)
async def test_a_tool_approval_is_an_interrupt_decided_on_resume(
    client: httpx.AsyncClient, alice: User, decision: dict[str, Any], expected: str
) -> None:
    thread = f"t-notes-{decision['action']}"
    saving = await run(client, alice, "notebook", body(thread, "Save a note: Redis keeps data"))
    [approval] = saving[-1].outcome.interrupts
    assert approval.reason == "tool_approval" and "save_note" in approval.message
    [call] = of(saving, "TOOL_CALL_START")
    assert approval.tool_call_id == call.tool_call_id
    entry = {"interruptId": approval.id, "status": "resolved", "payload": decision}
    decided = await run(client, alice, "notebook", body(thread, None, resume=[entry]))
    assert decided[-1].outcome.type == "success"
    assert expected in of(decided, "TOOL_CALL_RESULT")[0].content


async def test_a_thread_is_its_users_own(client: httpx.AsyncClient, alice: User, bob: User) -> None:
    await run(client, alice, "notebook", body("t-private"))
    theirs = await client.post("/agui/notebook", json=body("t-private"), headers=bob.headers)
    assert theirs.status_code == 404
    other_team = await client.post("/agui/research", json=body("t-private"), headers=alice.headers)
    assert other_team.status_code == 409
    unknown = await client.post("/agui/nope", json=body("t-x"), headers=alice.headers)
    assert unknown.status_code == 404
    nothing = await client.post(
        "/agui/research", json=body("t-idle", resume=[]), headers=alice.headers
    )
    assert nothing.status_code == 200  # an empty resume list is a plain run
    stale = await client.post(
        "/agui/research",
        json=body("t-idle", resume=[{"interruptId": "x", "status": "resolved"}]),
        headers=alice.headers,
    )
    assert stale.status_code == 409 and "no paused run" in stale.json()["detail"]


def test_the_docs_python_client_runs(
    api_settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (REPO / "docs" / "agui.md").read_text()
    [code] = re.findall(r"```python client\n(.*?)```", doc, re.DOTALL)
    with serving(create_app(api_settings)) as base:
        monkeypatch.setenv("TEAMGRAPH_URL", base)
        monkeypatch.setenv(
            "TEAMGRAPH_API_KEY", new_key(base, login(base, "agui@example.com"))["key"]
        )
        exec(compile(code, "docs/agui.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "[STEP_STARTED] research_cost" in printed and "[RUN_FINISHED]" in printed
    assert "PostgreSQL" in printed


def test_a_frame_is_what_ag_uis_encoder_writes_on_one_line_for_every_line_reader() -> None:
    from ag_ui.core import (
        Interrupt,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        StateDeltaEvent,
        TextMessageContentEvent,
    )
    from ag_ui.encoder import EventEncoder

    from teamgraph.server.protocols.agui import agui_frame
    from teamgraph.server.sse import one_line

    text = "first\u2028second\u2029third\x85end"
    content = TextMessageContentEvent(message_id="m1", delta=text)
    lines = agui_frame(content).splitlines()  # as httpx's aiter_lines splits
    assert lines[1:] == [""] and lines[0].startswith("data: ")  # one data line, then the end
    assert json.loads(lines[0].removeprefix("data: "))["delta"] == text
    asked = Interrupt(id="r:clarification", reason="clarification", message="Which one?")
    outcome = RunFinishedInterruptOutcome(interrupts=[asked])
    for event in (
        content,
        StateDeltaEvent(delta=[{"op": "replace", "path": "/plan/steps/0/status", "value": "done"}]),
        RunFinishedEvent(thread_id="t", run_id="r", outcome=outcome),
    ):
        assert agui_frame(event) == one_line(EventEncoder().encode(event))
