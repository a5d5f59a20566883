"""What the fake providers answer when no script says otherwise: what teamgraph's offline model
would, reading the request as it arrived over the wire (and, in-process, the call's brief)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import httpx
import httpx2

from teamgraph.brief import Brief, Member, ToolInfo, current_brief
from teamgraph.llm.offline import respond

from .model import Answer, Request, call_id

BRIEF_HEADER = "x-test-brief"
SENT_HEADER = "x-test-sent"  # time.monotonic() when the client sent the request
_BRIEFS: dict[str, dict[str, Any]] = {}


def think(request: Request) -> Answer:
    tools, choice = request.tools, request.tool_choice
    if request.schema is not None:  # a response format: answer as a forced tool would
        fn = {"name": "output", "description": "", "parameters": request.schema}
        tools, choice = [{"type": "function", "function": fn}], "output"
    reply = respond(request.messages, tools, choice, request.brief)
    if request.schema is not None:
        args = reply.tool_calls[0]["args"] if reply.tool_calls else {}
        return Answer(text=json.dumps(args))
    calls = [{"name": c["name"], "args": c["args"], "id": call_id()} for c in reply.tool_calls]
    return Answer(text=reply.text, tool_calls=calls)


def brief_of(headers: dict[str, str]) -> Brief | None:
    """The brief the in-process client sent with the request (see :func:`sending_briefs`)."""
    data = _BRIEFS.pop(headers.get(BRIEF_HEADER, ""), None)
    if data is None:
        return None
    data["members"] = tuple(Member(**m) for m in data["members"])
    data["tools"] = tuple(ToolInfo(**t) for t in data["tools"])
    for key in ("context", "transcript"):
        data[key] = tuple(tuple(pair) for pair in data[key])
    return Brief(**data)


@contextmanager
def sending_briefs() -> Iterator[None]:
    """Every HTTP request made inside a model call carries a reference to the call's brief, so
    the fake provider can answer as the offline model would (a real model reads the prompt).
    Both HTTP clients the provider SDKs use are covered: ``httpx`` (Ollama) and ``httpx2``
    (OpenAI, Anthropic)."""
    clients = [httpx.AsyncClient, httpx2.AsyncClient]
    originals = [client.send for client in clients]
    for client, original in zip(clients, originals, strict=True):
        client.send = _sending(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for client, original in zip(clients, originals, strict=True):
            client.send = original  # type: ignore[method-assign]


def _sending(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def send(self: Any, request: Any, **kwargs: Any) -> Any:
        brief = current_brief()
        if brief is not None:
            key = uuid.uuid4().hex
            _BRIEFS[key] = asdict(brief)
            request.headers[BRIEF_HEADER] = key
        request.headers[SENT_HEADER] = repr(time.monotonic())
        return await original(self, request, **kwargs)

    return send
