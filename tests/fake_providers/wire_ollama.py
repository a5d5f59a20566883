"""Ollama: ``POST /api/chat`` (streamed as JSON lines)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .model import Answer, Fail, Request

PATH = "/api/chat"
DONE = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "stop",
    "content_filter": "stop",
    "refusal": "stop",
}


def decode(body: dict[str, Any], headers: dict[str, str]) -> Request:
    messages: list[BaseMessage] = []
    names: dict[str, str] = {}
    for m in body["messages"]:
        if m["role"] == "system":
            messages.append(SystemMessage(m.get("content") or ""))
        elif m["role"] == "user":
            messages.append(HumanMessage(m.get("content") or ""))
        elif m["role"] == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                args = c["function"]["arguments"]
                args = json.loads(args) if isinstance(args, str) else args
                calls.append({"name": c["function"]["name"], "args": args, "id": c.get("id")})
            names |= {c["id"]: c["name"] for c in calls if c["id"]}
            messages.append(AIMessage(m.get("content") or "", tool_calls=calls))
        elif m["role"] == "tool":
            tid = m.get("tool_call_id") or ""
            messages.append(
                ToolMessage(
                    m.get("content") or "",
                    tool_call_id=tid,
                    name=m.get("tool_name") or names.get(tid),
                )
            )
    fmt = body.get("format")
    return Request(
        wire="ollama",
        model=body["model"],
        messages=messages,
        tools=body.get("tools") or [],
        tool_choice=None,  # Ollama has no tool_choice: the model decides
        schema=fmt if isinstance(fmt, dict) else None,
        stream=body.get("stream", True) is not False,
        body=body,
        headers=headers,
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _message(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:  # Ollama sends tool calls whole (arguments as an object), without ids
        message["tool_calls"] = [
            {"function": {"name": c["name"], "arguments": c["args"]}} for c in calls
        ]
    return message


def _done(answer: Answer, request: Request) -> dict[str, Any]:
    return {
        "model": request.model,
        "created_at": _now(),
        "done": True,
        "done_reason": DONE[answer.stop],
        "total_duration": 1000,
        "load_duration": 10,
        "prompt_eval_count": answer.input_tokens,
        "prompt_eval_duration": 100,
        "eval_count": answer.output_tokens,
        "eval_duration": 500,
    }


def reply(answer: Answer, request: Request) -> dict[str, Any]:
    return _done(answer, request) | {"message": _message(answer.text, answer.tool_calls)}


def stream(answer: Answer, request: Request, pieces: list[str]) -> Iterator[bytes]:
    def line(data: dict[str, Any]) -> bytes:
        return (json.dumps(data) + "\n").encode()

    for piece in pieces:
        yield line(
            {
                "model": request.model,
                "created_at": _now(),
                "done": False,
                "message": _message(piece, []),
            }
        )
    if answer.tool_calls:
        yield line(
            {
                "model": request.model,
                "created_at": _now(),
                "done": False,
                "message": _message("", answer.tool_calls),
            }
        )
    yield line(_done(answer, request) | {"message": _message("", [])})


def error(fail: Fail) -> dict[str, Any]:
    return {"error": fail.message}
