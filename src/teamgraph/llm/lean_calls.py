"""Calling a chat model without LangChain's per-call machinery, when nothing would notice the
difference.

``BaseChatModel.ainvoke`` and ``astream`` copy the run config, configure a callback manager
(tags, metadata, tracing defaults), announce the call to the handlers, compute the invocation
parameters for tracing and post-process every chunk: 0.1-0.5 ms per call on a small machine, more
than all of a workflow step's own bookkeeping. When the model has no cache, rate limiter, output
conversion or callbacks, and no handler, tracer, debug or verbose hook is active where it is
called, none of that has any effect. Then :func:`direct_call` calls a non-streaming model's
``_agenerate`` (teamgraph's offline model without streaming, test doubles, custom models
implementing only ``_agenerate``) and :func:`direct_stream` a streaming model's ``_astream``,
and both shape the reply as LangChain does (response metadata, message id). In every other case
they decline and the caller takes the ordinary path, so callbacks, LangSmith tracing,
``get_usage_metadata_callback`` and ``astream_events`` see every call as before. teamgraph streams
tokens through its own events, never through LangChain callbacks, so it needs none of them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.globals import get_debug, get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableBinding
from langchain_core.runnables.config import var_child_runnable_config

try:  # LangChain internals; without them every call takes the ordinary path
    from langchain_core.language_models.chat_models import _gen_info_and_msg_metadata
    from langchain_core.tracers.context import _configure_hooks, _tracing_v2_is_enabled
    from langchain_core.utils.utils import LC_ID_PREFIX
except ImportError:  # pragma: no cover - depends on the installed langchain-core
    _AVAILABLE = False
else:
    _AVAILABLE = True

# kwargs that BaseChatModel.agenerate consumes itself (tracing only) instead of passing them on
_TRACING_ONLY = ("ls_structured_output_format", "structured_output_format")
_LEGACY_TRACING_ENV = ("LANGCHAIN_TRACING", "LANGCHAIN_HANDLER")


def streams(model: Any) -> bool:
    """Whether the (possibly tool-bound) chat model implements token streaming."""
    inner = getattr(model, "bound", model)
    if not isinstance(inner, BaseChatModel):
        return True
    return type(inner)._astream is not BaseChatModel._astream or (
        type(inner)._stream is not BaseChatModel._stream
    )


def direct_call(
    model: Any, messages: Sequence[BaseMessage]
) -> Callable[[], Awaitable[AIMessage]] | None:
    """A call of a non-streaming ``model`` on ``messages`` that skips LangChain's callback and
    tracing layers, or ``None`` when those layers could have an effect (use ``ainvoke`` then)."""
    found = _unwrapped(model, messages)
    if found is None or streams(found[0]):
        return None
    chat_model, stop, kwargs = found
    return lambda: _generate(chat_model, list(messages), stop, kwargs)


def direct_stream(
    model: Any, messages: Sequence[BaseMessage]
) -> Callable[[], AsyncIterator[AIMessageChunk]] | None:
    """The chunks of a streaming ``model`` on ``messages`` without LangChain's callback and
    tracing layers, or ``None`` when those layers could have an effect (use ``astream`` then)."""
    found = _unwrapped(model, messages)
    if found is None or not streams(found[0]):
        return None
    chat_model, stop, kwargs = found
    if not chat_model._should_stream(async_api=True, **{**kwargs, "stream": True}):
        return None  # streaming disabled (for these arguments): astream calls ainvoke
    return lambda: _stream(chat_model, list(messages), stop, kwargs)


def _unwrapped(
    model: Any, messages: Sequence[BaseMessage]
) -> tuple[BaseChatModel, Any, dict[str, Any]] | None:
    """The chat model inside ``model``, its ``stop`` and its other call arguments, when its
    call may skip LangChain's per-call layers; ``None`` otherwise."""
    kwargs: Mapping[str, Any] = {}
    if isinstance(model, RunnableBinding):
        if model.config or model.config_factories:
            return None
        kwargs, model = model.kwargs, model.bound
    if not (_AVAILABLE and isinstance(model, BaseChatModel)):
        return None
    if not _plain(model) or not _quiet() or not all(isinstance(m.content, str) for m in messages):
        return None
    call_kwargs = {k: v for k, v in kwargs.items() if k not in _TRACING_ONLY}
    stop = call_kwargs.pop("stop", None)
    return model, stop, call_kwargs


async def _generate(
    model: BaseChatModel, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
) -> AIMessage:
    result = await model._agenerate(messages, stop=stop, **kwargs)
    for i, generation in enumerate(result.generations):  # as _agenerate_with_cache does
        if generation.message.id is None:
            generation.message.id = f"{LC_ID_PREFIX}-{uuid.uuid4()}-{i}"
        generation.message.response_metadata = _gen_info_and_msg_metadata(generation)
    first = result.generations[0].message
    if len(result.generations) == 1 and result.llm_output is not None:
        first.response_metadata = {**result.llm_output, **first.response_metadata}
    return first if isinstance(first, AIMessage) else AIMessage(content=first.content, id=first.id)


async def _stream(
    model: BaseChatModel, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
) -> AsyncIterator[AIMessageChunk]:
    run_id = f"{LC_ID_PREFIX}-{uuid.uuid4()}"
    async for chunk in model._astream(messages, stop=stop, **kwargs):  # as astream does
        if chunk.message.id is None:
            chunk.message.id = run_id
        chunk.message.response_metadata = _gen_info_and_msg_metadata(chunk)
        yield cast(AIMessageChunk, chunk.message)


def _plain(model: BaseChatModel) -> bool:
    """No callbacks, cache, rate limiter or output conversion of the model's own."""
    cached = model.cache is not False and (model.cache is not None or get_llm_cache() is not None)
    return not (
        model.callbacks
        or model.verbose
        or cached
        or model.rate_limiter is not None
        or model.output_version not in (None, "v0")
    )


def _quiet() -> bool:
    """No callback handler, tracer, debug mode or configure hook is active here."""
    config = var_child_runnable_config.get() or {}
    callbacks = config.get("callbacks")
    if callbacks is not None and (
        callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", True)
    ):
        return False
    if get_debug() or _tracing_v2_is_enabled() or any(map(os.environ.get, _LEGACY_TRACING_ENV)):
        return False
    return not any(
        var.get() is not None or (env is not None and os.environ.get(env))
        for var, _inheritable, _cls, env in _configure_hooks
    )
