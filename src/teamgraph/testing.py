"""Test doubles for users' tests and ours: scripted chat models that never touch a network.

``ScriptedChatModel(responses=[...])`` replies with each response in turn; a response may be:

* a ``str`` — a text answer;
* an ``AIMessage`` — returned as is (use it for several tool calls in one turn);
* ``ToolCall(name, args)`` — one tool call;
* a ``dict`` or pydantic model — structured output (a tool call of the bound schema);
* an ``Exception`` instance — raised (to test retries and failures);
* a callable ``(messages) -> response`` — computed from the conversation.

``FunctionChatModel(fn)`` calls ``fn(messages)`` for every turn (sync or async), for tests whose
calls arrive in no fixed order, such as parallel workflow steps. Inside ``fn``,
:func:`current_brief` says what the request is for (planner, supervisor, an agent's task, ...),
as data: answer by role without parsing prompts.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, PrivateAttr

from teamgraph.brief import current_brief
from teamgraph.errors import TransientModelError
from teamgraph.llm.offline import BindsTools

__all__ = [
    "FunctionChatModel",
    "ScriptExhausted",
    "ScriptedChatModel",
    "ToolCall",
    "current_brief",
    "transient",
]


@dataclass
class ToolCall:
    """One scripted tool call."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class ScriptExhausted(AssertionError):
    """The model was called more often than the script allows."""


def transient(message: str = "scripted 503 Service Unavailable") -> TransientModelError:
    """An error the runtime treats as transient (and retries)."""
    return TransientModelError(message)


Response = Any


class _FakeBase(BindsTools):
    model_name: str = "fake"
    latency: float = 0.0
    usage: tuple[int, int] = (10, 5)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Every conversation the model received, in call order."""
        return self._calls

    def _next(self, messages: list[BaseMessage]) -> Response:
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(list(messages))
        response = self._next(messages)
        return self._result(response, kwargs.get("tools") or [])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(list(messages))
        response = self._next(messages)
        if inspect.isawaitable(response):
            response = await response
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._result(response, kwargs.get("tools") or [])

    def _result(self, response: Response, tools: list[dict[str, Any]]) -> ChatResult:
        if isinstance(response, BaseException):
            raise response
        message = _to_message(response, tools)
        if message.usage_metadata is None:
            i, o = self.usage
            message.usage_metadata = UsageMetadata(
                input_tokens=i, output_tokens=o, total_tokens=i + o
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedChatModel(_FakeBase):
    """Replies with ``responses`` in order; raises :class:`ScriptExhausted` past the end."""

    responses: list[Any]
    _index: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "teamgraph-scripted"

    def _next(self, messages: list[BaseMessage]) -> Response:
        if self._index >= len(self.responses):
            raise ScriptExhausted(
                f"scripted model called {self._index + 1} times; script has {len(self.responses)}"
            )
        response = self.responses[self._index]
        self._index += 1
        return (
            response(messages)
            if callable(response) and not isinstance(response, type)
            else (response)
        )


class FunctionChatModel(_FakeBase):
    """Calls ``fn(messages)`` (sync or async) for each turn."""

    fn: Callable[[list[BaseMessage]], Any]

    @property
    def _llm_type(self) -> str:
        return "teamgraph-function"

    def _next(self, messages: list[BaseMessage]) -> Response:
        return self.fn(messages)


def _to_message(response: Response, tools: list[dict[str, Any]]) -> AIMessage:
    if isinstance(response, AIMessage):
        return response.model_copy()
    if isinstance(response, str):
        return AIMessage(content=response)
    if isinstance(response, ToolCall):
        return AIMessage(content="", tool_calls=[_call(response.name, response.args, response.id)])
    if isinstance(response, BaseModel):
        response = response.model_dump(mode="json")
    if isinstance(response, dict):
        if not tools:
            return AIMessage(content=json.dumps(response))
        return AIMessage(content="", tool_calls=[_call(tools[0]["function"]["name"], response)])
    raise TypeError(f"cannot script a model response of type {type(response).__name__}")


def _call(name: str, args: dict[str, Any], call_id: str | None = None) -> Any:
    return {"name": name, "args": args, "id": call_id or f"call_{uuid.uuid4().hex[:12]}"}
