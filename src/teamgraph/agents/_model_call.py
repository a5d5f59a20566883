"""One model call: streamed as token events, retried on transient errors, usage recorded."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from teamgraph.events import TokenDelta, UsageRecorded
from teamgraph.llm.direct import direct_call, streams
from teamgraph.llm.errors import is_transient
from teamgraph.run_context import RunContext


async def call_model(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: Sequence[BaseMessage],
    ctx: RunContext,
    *,
    agent: str,
    model_name: str,
    step_id: str | None = None,
) -> AIMessage:
    """Stream one reply, emitting ``token`` events; retry transient errors with backoff."""
    ctx.usage.admit()
    try:  # the common case pays nothing for the retry machinery
        reply = await _stream_once(model, messages, ctx, agent, step_id)
    except Exception as exc:
        if not is_transient(exc) or ctx.team.workflow.retry.max_attempts < 2:
            raise
        reply = await _retry(model, messages, ctx, agent, step_id)
    usage = ctx.usage.record(agent, step_id, model_name, reply)
    ctx.emit(UsageRecorded, agent, agent=agent, model=model_name, usage=usage, step_id=step_id)
    return reply


async def _retry(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: Sequence[BaseMessage],
    ctx: RunContext,
    agent: str,
    step_id: str | None,
) -> AIMessage:
    """Attempts 2..max_attempts, with exponential backoff and jitter."""
    retry = ctx.team.workflow.retry
    await asyncio.sleep(retry.initial_delay_s + random.uniform(0, retry.jitter_s))
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(retry.max_attempts - 1),
        wait=wait_exponential_jitter(
            multiplier=2 * retry.initial_delay_s, max=retry.max_delay_s, jitter=retry.jitter_s
        ),
        reraise=True,
    ):
        with attempt:
            return await _stream_once(model, messages, ctx, agent, step_id)
    raise AssertionError("unreachable: tenacity re-raises the last error")


async def _stream_once(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: Sequence[BaseMessage],
    ctx: RunContext,
    agent: str,
    step_id: str | None,
) -> AIMessage:
    if not streams(model):  # one reply, one token event: skip the chunk machinery
        direct = direct_call(model, messages)
        reply = await (direct() if direct else model.ainvoke(list(messages)))
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply.content)
        if message.text:
            ctx.emit(TokenDelta, agent, agent=agent, text=message.text, step_id=step_id)
        return message
    merged: AIMessageChunk | None = None
    async for chunk in model.astream(list(messages)):
        if not isinstance(chunk, AIMessageChunk):
            chunk = AIMessageChunk(**chunk.model_dump(exclude={"type"}))
        if isinstance(chunk.content, str) and chunk.content:
            ctx.emit(TokenDelta, agent, agent=agent, text=chunk.content, step_id=step_id)
        merged = chunk if merged is None else merged + chunk
    if merged is None:
        return AIMessage(content="")
    return AIMessage(
        content=merged.content,
        tool_calls=merged.tool_calls,
        usage_metadata=merged.usage_metadata,
        response_metadata=merged.response_metadata,
        id=merged.id,
    )
