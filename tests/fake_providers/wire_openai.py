"""OpenAI Chat Completions (and every OpenAI-compatible server): ``POST /v1/chat/completions``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .model import Answer, Fail, Request, call_id

PATH = "/v1/chat/completions"
FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "stop",
}


def decode(body: dict[str, Any], headers: dict[str, str]) -> Request:
    schema = None
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
    return Request(
        wire="openai",
        model=body["model"],
        messages=_messages(body["messages"]),
        tools=body.get("tools", []),
        tool_choice=body.get("tool_choice"),
        schema=schema,
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        body=body,
        headers=headers,
    )


def _messages(raw: list[dict[str, Any]]) -> list[BaseMessage]:
    names: dict[str, str] = {}
    out: list[BaseMessage] = []
    for m in raw:
        text = _text(m.get("content"))
        if m["role"] in ("system", "developer"):
            out.append(SystemMessage(text))
        elif m["role"] == "user":
            out.append(HumanMessage(text))
        elif m["role"] == "assistant":
            calls = [
                {
                    "name": c["function"]["name"],
                    "args": json.loads(c["function"]["arguments"]),
                    "id": c["id"],
                }
                for c in m.get("tool_calls") or []
            ]
            names |= {c["id"]: c["name"] for c in calls}
            out.append(AIMessage(text, tool_calls=calls))
        elif m["role"] == "tool":
            tid = m["tool_call_id"]
            out.append(ToolMessage(text, tool_call_id=tid, name=names.get(tid)))
        else:
            raise ValueError(f"unknown role {m['role']!r}")
    return out


def _text(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
    }


def reply(answer: Answer, request: Request) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text or None,
        "refusal": answer.refusal or None,
    }
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in answer.tool_calls
        ]
    return {
        "id": call_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": FINISH[answer.stop]}
        ],
        "usage": _usage(answer),
    }


def stream(answer: Answer, request: Request, pieces: list[str]) -> Iterator[bytes]:
    """Chunks as OpenAI sends them: role, text pieces (or the refusal), each tool call's name
    then its arguments in fragments, the finish reason, the usage chunk when asked for."""
    ident, created = call_id("chatcmpl"), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        data = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces:
        yield chunk({"refusal": piece} if answer.refusal else {"content": piece})
    for index, call in enumerate(answer.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                ]
            }
        )
        arguments = json.dumps(call["args"])
        for at in range(0, len(arguments), 7):  # arguments arrive in fragments
            fragment = arguments[at : at + 7]
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
    yield chunk({}, FINISH[answer.stop])
    if request.include_usage:
        data = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [],
            "usage": _usage(answer),
        }
        yield f"data: {json.dumps(data)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def error(fail: Fail) -> dict[str, Any]:
    kind = fail.kind or {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(fail.status, "")
    return {
        "error": {
            "message": fail.message,
            "type": kind or "server_error",
            "param": None,
            "code": kind or None,
        }
    }
