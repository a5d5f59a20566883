"""Anthropic Messages: ``POST /v1/messages`` (streamed as named SSE events)."""

from __future__ import annotations

import json
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

PATH = "/v1/messages"
STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "refusal": "refusal",
}


def decode(body: dict[str, Any], headers: dict[str, str]) -> Request:
    messages: list[BaseMessage] = []
    if body.get("system"):
        messages.append(SystemMessage(_text(body["system"])))
    names: dict[str, str] = {}
    for m in body["messages"]:
        blocks = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        if m["role"] == "assistant":
            calls = [
                {"name": b["name"], "args": b["input"], "id": b["id"]}
                for b in blocks
                if b["type"] == "tool_use"
            ]
            names |= {c["id"]: c["name"] for c in calls}
            messages.append(AIMessage(_text(blocks), tool_calls=calls))
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                tid = b["tool_use_id"]
                status = "error" if b.get("is_error") else "success"
                messages.append(
                    ToolMessage(
                        _text(b.get("content", "")),
                        tool_call_id=tid,
                        name=names.get(tid),
                        status=status,
                    )
                )
        text = [b for b in blocks if b["type"] == "text"]
        if text:
            messages.append(HumanMessage(_text(text)))
    tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t["input_schema"],
            },
        }
        for t in body.get("tools", [])
    ]
    choice = body.get("tool_choice") or {}
    tool_choice = choice.get("name") if choice.get("type") == "tool" else choice.get("type")
    return Request(
        wire="anthropic",
        model=body["model"],
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        schema=None,
        stream=bool(body.get("stream")),
        body=body,
        headers=headers,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.text:
        blocks.append({"type": "text", "text": answer.text})
    blocks += [
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
        for c in answer.tool_calls
    ]
    return blocks


def reply(answer: Answer, request: Request) -> dict[str, Any]:
    return {
        "id": call_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": _blocks(answer),
        "stop_reason": STOP[answer.stop],
        "stop_sequence": None,
        "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
    }


def stream(answer: Answer, request: Request, pieces: list[str]) -> Iterator[bytes]:
    """Events as Anthropic sends them: message_start (input tokens), a content block per text
    and tool call (text deltas; tool input as partial JSON fragments), message_delta (stop reason,
    output tokens), message_stop."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = reply(Answer(), request) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": answer.input_tokens, "output_tokens": 1}
    yield event("message_start", {"message": start})
    index = 0
    if pieces:
        yield event(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        )
        for piece in pieces:
            yield event(
                "content_block_delta",
                {"index": index, "delta": {"type": "text_delta", "text": piece}},
            )
        yield event("content_block_stop", {"index": index})
        index += 1
    for call in answer.tool_calls:
        block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
        yield event("content_block_start", {"index": index, "content_block": block})
        arguments = json.dumps(call["args"])
        for at in range(0, len(arguments), 7):
            delta = {"type": "input_json_delta", "partial_json": arguments[at : at + 7]}
            yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
        index += 1
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": STOP[answer.stop], "stop_sequence": None},
            "usage": {  # cumulative, input included, as Anthropic's API sends it
                "input_tokens": answer.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": answer.output_tokens,
            },
        },
    )
    yield event("message_stop", {})


def error(fail: Fail) -> dict[str, Any]:
    kind = fail.kind or {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(fail.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": fail.message}}
