"""A thread's state in the LangGraph Agent Protocol's shapes, and human replies read back from
them — what ``useStream`` (``@langchain/langgraph-sdk``) and agent-chat-ui read and send.

**Messages.** ``values.messages`` is the thread's conversation as LangChain message dicts: the
stored human and AI messages, and from each run's events the clarifying questions it asked
(AI messages), its tool calls (AI messages with ``tool_calls``) and their results (``tool``
messages, ``tool_call_id`` = the call's id).

**Interrupts.** A clarifying question is an interrupt whose value is the question (a string),
answered by ``Command(resume=<the answer>)``. Tool calls waiting for approval are one interrupt
per pause in LangChain's human-in-the-loop shape — ``{"action_requests": [{"name", "args",
"description"}], "review_configs": [{"action_name", "allowed_decisions"}]}`` — decided by
``Command(resume={"decisions": [{"type": "approve" | "reject" | "edit", ...}]})``, one decision
per action request in order (``reject`` may carry a ``message``, ``edit`` an ``edited_action``
``{"name", "args"}``). The earlier shapes still resume: ``{"action": ...}`` for every call,
``{<request id>: {"action": ...}}`` per call, and ``{<interrupt id>: {"decisions": [...]}}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from teamgraph.errors import UsageError
from teamgraph.events import Event
from teamgraph.storage.models import MessageRow

QUESTION = "clarification"  # the suffix of a question's interrupt id
DECISIONS = ["approve", "edit", "reject"]
# the events a thread's messages are made of, besides the stored ones
MESSAGE_EVENTS = ("clarification_requested", "approval_requested", "tool_called", "tool_returned")


# --- messages --------------------------------------------------------------------------------
def message(role: str, content: str, message_id: str, **extra: Any) -> dict[str, Any]:
    """A chat message as LangChain serialises it."""
    kind = {"user": "human", "assistant": "ai", "system": "system"}.get(role, role)
    return {"type": kind, "content": content, "id": message_id, "additional_kwargs": {}, **extra}


def thread_messages(stored: Sequence[MessageRow], events: Sequence[Event]) -> list[dict[str, Any]]:
    """The thread's messages: the stored ones, with each run's questions, tool calls and tool
    results (``events``, in seq order) after its request and before its answer — a question
    before the human answer that follows it."""
    pending: dict[str, list[Event]] = {}
    for event in events:
        pending.setdefault(event.run_id, []).append(event)
    out: list[dict[str, Any]] = []
    current = ""  # the run of the last message
    for row in stored:
        run = row.run_id or ""
        if run != current:  # the previous run's events left (it failed, or was cancelled)
            out += _event_messages(pending.pop(current, []))
        elif row.role == "user":  # an answer: after the question it answers
            out += _event_messages(_until_question(pending.get(run, [])))
        if row.role != "user":
            out += _event_messages(pending.pop(run, []))
        current = run
        out.append(message(row.role, row.content, str(row.id)))
    for rest in pending.values():  # the last run, still going or paused
        out += _event_messages(rest)
    return out


def _until_question(events: list[Event]) -> list[Event]:
    """Take ``events`` up to and including the first question (all if none)."""
    for i, event in enumerate(events):
        if event.type == "clarification_requested":
            taken, events[:] = events[: i + 1], events[i + 1 :]
            return taken
    taken, events[:] = events[:], []
    return taken


def _event_messages(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Questions as AI messages; tool calls in a row by one agent as one AI message with
    ``tool_calls`` (a call approved, then made, once); tool results as ``tool`` messages."""
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}  # call id → the call, shown as last made
    open_calls: dict[str, Any] | None = None  # the AI message the next call may join
    for event in events:
        mid = f"{event.run_id}:{event.seq}"
        if event.type == "clarification_requested":
            out.append(message("ai", event.question, mid))
            open_calls = None
        elif event.type in ("approval_requested", "tool_called"):
            if event.call_id in calls:  # approved (or edited), then made
                calls[event.call_id]["args"] = event.args
                continue
            call = {
                "name": event.tool,
                "args": event.args,
                "id": event.call_id,
                "type": "tool_call",
            }
            calls[event.call_id] = call
            if open_calls is not None and open_calls.get("name") == event.agent:
                open_calls["tool_calls"].append(call)
                continue
            open_calls = message("ai", "", mid, name=event.agent, tool_calls=[call])
            open_calls["invalid_tool_calls"] = []
            out.append(open_calls)
        elif event.type == "tool_returned":
            status = "error" if event.is_error else "success"
            result = {"tool_call_id": event.call_id, "name": event.tool, "status": status}
            out.append(message("tool", event.output, mid, **result))
            open_calls = None
    return out


# --- interrupts ------------------------------------------------------------------------------
def interrupts(pending: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What a paused run waits for (``Runner.pending``'s items) as LangGraph interrupts: a
    question each (``{"question": …}``: agent-chat-ui draws an object as a table of its fields,
    a bare string as one row per character), and each pause's tool calls as one
    human-in-the-loop request."""
    out: list[dict[str, Any]] = []
    approvals: dict[str, list[Mapping[str, Any]]] = {}
    for item in pending:
        if item["type"] == "clarification":
            value = {"question": item["question"]}
            out.append({"value": value, "id": f"{item['interrupt_id']}:{QUESTION}"})
        else:
            approvals.setdefault(item["interrupt_id"], []).append(item)
    out += [{"value": hitl_request(calls), "id": iid} for iid, calls in approvals.items()]
    return out


def hitl_request(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tool calls waiting for approval in LangChain's human-in-the-loop shape (each action
    request also names the ``id`` a keyed decision refers to)."""
    actions = [
        {
            "name": call["tool"],
            "args": call["args"],
            "description": f"{call['agent']} wants to call {call['tool']}",
            "id": call["id"],
        }
        for call in calls
    ]
    configs: dict[str, dict[str, Any]] = {}
    for call in calls:
        config = {"action_name": call["tool"], "allowed_decisions": list(DECISIONS)}
        if call.get("args_schema"):
            config["args_schema"] = call["args_schema"]
        configs.setdefault(call["tool"], config)
    return {"action_requests": actions, "review_configs": list(configs.values())}


# --- replies ---------------------------------------------------------------------------------
def decisions(value: Any, calls: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], Any]:
    """``Command(resume=value)`` on tool calls waiting for approval, as teamgraph decisions by
    request id and a default one."""
    if isinstance(value, dict) and "action" in value:
        return {}, value
    if isinstance(value, dict) and "decisions" in value:
        return _positional(value["decisions"], calls, "resume.decisions"), None
    if not isinstance(value, dict) or not value:
        raise UsageError(
            "resume: tool calls wait for approval; send {'decisions': [{'type': 'approve' | "
            "'reject' | 'edit', ...}]}, one per action request"
        )
    by_request: dict[str, Any] = {}
    for key, item in value.items():
        group = [c for c in calls if c.get("interrupt_id") == key]
        if group and isinstance(item, dict) and "decisions" in item:
            by_request |= _positional(item["decisions"], group, f"resume[{key!r}].decisions")
        else:
            by_request[key] = item
    return by_request, None


def _positional(
    given: Any, calls: Sequence[Mapping[str, Any]], field: str
) -> dict[str, dict[str, Any]]:
    if not isinstance(given, list) or len(given) != len(calls):
        raise UsageError(
            f"{field}: a list of {len(calls)} decision(s), one per action request, in order"
        )
    pairs = enumerate(zip(calls, given, strict=True))
    return {call["id"]: _decision(d, f"{field}[{i}]") for i, (call, d) in pairs}


def _decision(given: Any, field: str) -> dict[str, Any]:
    """One human-in-the-loop decision as a teamgraph one."""
    kind = given.get("type") if isinstance(given, dict) else None
    if kind == "approve":
        return {"action": "approve"}
    if kind == "reject":
        return {"action": "reject", "comment": str(given.get("message") or "")}
    if kind == "edit":
        edited = given.get("edited_action") or {}
        args = edited.get("args") if isinstance(edited, dict) else None
        if not isinstance(args, dict):
            raise UsageError(f"{field}.edited_action.args: the call's new arguments, an object")
        return {"action": "edit", "args": args}
    raise UsageError(f"{field}.type: {kind!r} is not one of {', '.join(DECISIONS)}")
