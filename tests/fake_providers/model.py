"""What the fake providers exchange, whatever the wire: a decoded request, an answer, a script."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from teamgraph.brief import Brief

Finish = Literal["stop", "length", "tool_calls", "content_filter", "refusal"]


@dataclass
class Request:
    """One model request as the fake provider understood it."""

    wire: str  # openai | anthropic | ollama
    model: str
    messages: list[BaseMessage]
    tools: list[dict[str, Any]]  # OpenAI function format, whatever the wire said
    tool_choice: Any
    schema: dict[str, Any] | None  # structured output asked as a response format
    stream: bool
    body: dict[str, Any]
    headers: dict[str, str]
    brief: Brief | None = None
    include_usage: bool = False  # OpenAI: stream_options.include_usage


@dataclass
class Answer:
    """What the fake model says: text, tool calls, why it stopped, what it bills."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {name, args, id}
    finish: Finish | None = None
    refusal: str = ""
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def stop(self) -> Finish:
        return self.finish or ("tool_calls" if self.tool_calls else "stop")

    def bill(self, request: Request) -> Answer:
        """Token counts as a provider reports them: from the request body and the answer
        (deliberately not teamgraph's own estimate, so tests see whose numbers are used)."""
        said = self.text + self.refusal + "".join(json.dumps(c["args"]) for c in self.tool_calls)
        self.input_tokens = len(json.dumps(request.body.get("messages", []))) // 3 + 11
        self.output_tokens = len(said) // 3 + 5
        return self


def call_id(prefix: str = "call") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


# --- script items: what the next requests get instead of the brain's answer -------------------
@dataclass
class Say:
    """Answer exactly this."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {name, args}
    finish: Finish | None = None


@dataclass
class Refuse:
    """Decline (a refusal, or a content filter where the wire has no refusal)."""

    text: str = "I can't help with that."


@dataclass
class Fail:
    """An HTTP error in the wire's error shape."""

    status: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    kind: str = ""  # the provider's error type/code


@dataclass
class Reset:
    """Send ``after`` stream chunks (or the headers of a JSON reply), then drop the connection."""

    after: int = 0


@dataclass
class Hang:
    """Wait ``seconds`` before answering (a timeout on the client's side)."""

    seconds: float


Scripted = Say | Refuse | Fail | Reset | Hang
