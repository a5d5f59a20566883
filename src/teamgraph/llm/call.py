"""The model-call path: every model request teamgraph makes goes through :func:`ask` (a reply) or
:func:`ask_structured` (a validated structured value) — agents, planner, supervisor, moderator,
synthesizer and structured output alike.

A call is a side effect made exactly-once by :func:`teamgraph.durable.once`: a reply the run's
journal holds for the call's key (an earlier attempt made it before a crash or a pause) is
returned as it was — nothing is asked, spent or counted again. Otherwise, in order:

1. **budget** — the run's limits are checked and the call is counted before it starts;
2. **the call** — through the provider's limits (:mod:`teamgraph.llm.provider_limits`), with the
   call's :class:`~teamgraph.brief.Brief` current, streamed as ``token`` events (text calls);
   transient errors retried after ``Retry-After`` or with backoff and jitter, each retry
   announced as a ``model_retry`` event (its partial tokens void); a provider's failure
   reported as :mod:`teamgraph.llm.provider_errors` classifies it;
3. **journal** — the reply and what it cost are recorded at once (the window in which a crash
   loses a paid reply is this one write);
4. **usage** — counted per step, agent and run, and emitted once as a ``usage`` event."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import jsonschema
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from teamgraph import prompts
from teamgraph.brief import Brief, briefed
from teamgraph.durable import Journal, JournalKey, ModelEntry, once
from teamgraph.errors import ModelCallFailed
from teamgraph.events import BaseEvent, ModelRetry, TokenDelta, UsageRecorded
from teamgraph.llm.cassette import Cassette, model_request
from teamgraph.llm.lean_calls import direct_call, direct_stream, streams
from teamgraph.llm.provider_errors import (
    MAX_RETRY_AFTER_S,
    is_transient,
    redact,
    retry_after,
    translate,
)
from teamgraph.llm.usage import UsageTracker
from teamgraph.specs.team import RetryOptions

if TYPE_CHECKING:
    from teamgraph.llm.provider import ModelProvider

T = TypeVar("T")
E = TypeVar("E", bound=BaseEvent)
Schema = type[BaseModel] | dict[str, Any]
STRUCTURED_ATTEMPTS = 2  # a structured reply that fails validation is asked for once more


class CallScope(Protocol):
    """What a model call needs from the run it belongs to (a ``RunContext`` is one)."""

    usage: UsageTracker
    journal: Journal
    cassette: Cassette | None
    models: ModelProvider

    def site(self, name: str) -> str: ...

    def step_keys(self, step_id: str | None) -> tuple[str, ...]: ...

    @property
    def retry(self) -> RetryOptions: ...

    def emit(self, cls: type[E], *path: str, **fields: Any) -> E: ...


@dataclass(frozen=True)
class Caller:
    """Who makes a call and is charged for it: the role or agent, its model (possibly bound to
    tools) and the model's name in the price table, and the step it works for."""

    agent: str
    model: Runnable[LanguageModelInput, BaseMessage]
    model_name: str
    step_id: str | None = None


async def ask(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    key: JournalKey,
    brief: Brief,
    announce: Callable[[], None] | None = None,
) -> AIMessage:
    """One reply, streamed as ``token`` events; replayed from the journal when recorded.
    ``announce`` runs once before the call is first really made (never for a replay)."""

    async def call() -> ModelEntry:
        scope.usage.admit()
        reply = await _reply(scope, caller, messages, key, brief)
        return _entry(scope, caller, reply)

    entry = await once(
        scope.journal,
        key,
        ModelEntry,
        call,
        crash="model",
        announce=announce,
        settle=partial(_count, scope, caller),
    )
    reply = entry.message()
    check_declined(reply, caller.model_name)  # paid and journalled first: replayed, it fails again
    return reply


async def _reply(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    key: JournalKey,
    brief: Brief,
) -> AIMessage:
    """The model's reply (recorded when recording a run), or the recording's (replaying one)."""
    cassette = scope.cassette
    if cassette is None:
        return await _retrying(
            scope, caller, messages, lambda: _stream_once(scope, caller, messages, brief)
        )
    site, request = _site(scope, caller, key), model_request(messages, caller.model)
    if cassette.replaying:
        reply, _ = cassette.model_reply(site, request)
        if reply.text:
            agent = caller.agent
            scope.emit(TokenDelta, agent, agent=agent, text=reply.text, step_id=caller.step_id)
        return reply
    reply = await _retrying(
        scope, caller, messages, lambda: _stream_once(scope, caller, messages, brief)
    )
    cassette.record_model(site, request, reply)
    return reply


def _site(scope: CallScope, caller: Caller, key: JournalKey) -> str:
    """Where the call is made, as a recording names it (stable from run to run)."""
    return f"{scope.site(caller.step_id or caller.agent)}:{key.leaf}"


async def ask_structured(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    schema: Schema,
    key: JournalKey,
    brief: Brief,
) -> Any:
    """A value of ``schema`` (a pydantic model, or a JSON-Schema-valid dict). An invalid reply is
    answered with the validation error and asked once more; :class:`StructuredOutputError`
    when that one is invalid too. Each attempt is a model call of its own (budget, journal,
    usage)."""
    conversation = list(messages)
    error = ""
    for attempt in range(STRUCTURED_ATTEMPTS):
        attempt_key = key if attempt == 0 else key.retry(attempt)
        value, error = await _structured_once(
            scope, caller, conversation, schema, attempt_key, brief
        )
        if not error:
            return value
        conversation.append(HumanMessage(prompts.structured_retry(error)))
    raise StructuredOutputError(error)


class StructuredOutputError(ValueError):
    """A model returned invalid structured output on every attempt (the last error)."""


async def _structured_once(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    schema: Schema,
    key: JournalKey,
    brief: Brief,
) -> tuple[Any, str]:
    async def call() -> ModelEntry:
        scope.usage.admit()
        raw = await _structured_reply(scope, caller, messages, schema, key, brief)
        reply = raw.get("raw")
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content="")
        value, error = _validated(schema, raw.get("parsed"), raw.get("parsing_error"))
        parsed = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        return _entry(scope, caller, reply, parsed=parsed, error=error)

    settle = partial(_count, scope, caller)
    entry = await once(scope.journal, key, ModelEntry, call, crash="model", settle=settle)
    return (None, entry.error) if entry.error else (_revive(schema, entry.parsed), "")


async def _structured_reply(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    schema: Schema,
    key: JournalKey,
    brief: Brief,
) -> dict[str, Any]:
    """``{"raw": reply, "parsed": value, "parsing_error": ...}`` from the model, or from the
    recording when replaying one."""
    site = _site(scope, caller, key)
    request = model_request(messages, caller.model, schema_name(schema))
    cassette = scope.cassette
    if cassette is not None and cassette.replaying:
        reply, parsed = cassette.model_reply(site, request)
        return {"raw": reply, "parsed": _revive(schema, parsed) if parsed is not None else None}
    runnable = caller.model.with_structured_output(schema, include_raw=True)  # type: ignore[attr-defined]

    async def once() -> dict[str, Any]:
        with briefed(brief):
            raw = await runnable.ainvoke(list(messages))
        return dict(raw) if isinstance(raw, dict) else {"parsed": raw, "raw": None}

    raw = await _retrying(scope, caller, messages, once)
    if cassette is not None and isinstance(raw.get("raw"), AIMessage):
        value = raw.get("parsed")
        parsed = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        cassette.record_model(site, request, raw["raw"], parsed)
    return raw


def schema_name(schema: Schema) -> str:
    """The name a structured call's schema goes by (its title, or the model's class)."""
    return str(schema.get("title", "")) if isinstance(schema, dict) else schema.__name__


def _entry(
    scope: CallScope, caller: Caller, reply: AIMessage, *, parsed: Any = None, error: str = ""
) -> ModelEntry:
    """The reply as the journal records it, with what it cost and whom it is charged to."""
    return ModelEntry.of(
        reply,
        parsed=parsed,
        error=error,
        agent=caller.agent,
        step_id=caller.step_id,
        steps=list(scope.step_keys(caller.step_id)),
        model=caller.model_name,
        usage=scope.usage.measure(caller.model_name, reply),
    )


def _count(scope: CallScope, caller: Caller, entry: ModelEntry) -> None:
    """A journalled reply counted per step, agent and run, and announced as ``usage``."""
    scope.usage.add(caller.agent, entry.steps, entry.usage)
    scope.emit(
        UsageRecorded,
        caller.agent,
        agent=caller.agent,
        model=caller.model_name,
        usage=entry.usage,
        stop_reason=stop_reason(entry.message()),
        step_id=caller.step_id,
    )


async def _retrying(
    scope: CallScope,
    caller: Caller,
    messages: Sequence[BaseMessage],
    attempt: Callable[[], Awaitable[T]],
) -> T:
    """``attempt()`` through the model's limits; transient errors retried (tenacity) after the
    provider's ``Retry-After`` or with exponential backoff and jitter, each retry announced. A
    provider's failure is reported as :func:`~teamgraph.llm.provider_errors.translate` says (the run
    stops, or the step fails). The common case pays nothing for the retry machinery."""
    limits = scope.models.limits_for(caller.model_name)
    call = attempt if limits is None else partial(limits.through, attempt, messages)
    try:
        return await call()
    except Exception as exc:
        first: BaseException = exc  # retried below, outside this handler (no chained context)
    retrying = _retry_policy(scope, caller)
    try:
        return await retrying(_failed_once(first, call))
    except Exception as exc:
        failure = translate(exc, caller.model_name, retrying.statistics.get("attempt_number", 1))
        if failure is exc:
            raise
        raise failure from exc


def _failed_once(
    error: BaseException, call: Callable[[], Awaitable[T]]
) -> Callable[[], Awaitable[T]]:
    """``call`` whose first attempt is the one made already: it raises ``error`` again (so
    tenacity counts it as its first attempt), then calls for real."""
    failed = [error]

    async def again() -> T:
        if failed:
            raise failed.pop()
        return await call()

    return again


def _retry_policy(scope: CallScope, caller: Caller) -> AsyncRetrying:
    """Tenacity's retrying of the caller's transient errors, as the run's retry options say
    (:func:`_delay`), each retry announced as a ``model_retry`` event."""
    policy = scope.retry

    def wait(state: RetryCallState) -> float:
        return _delay(_error(state), policy, state.attempt_number) or 0.0

    def stop(state: RetryCallState) -> bool:
        return _delay(_error(state), policy, state.attempt_number) is None

    return AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop,
        wait=wait,
        before_sleep=partial(_announce_retry, scope, caller),
        reraise=True,
    )


def _announce_retry(scope: CallScope, caller: Caller, state: RetryCallState) -> None:
    """A ``model_retry`` event: which attempt failed, how, and how long until the next."""
    error = _error(state)
    scope.emit(
        ModelRetry,
        caller.agent,
        agent=caller.agent,
        model=caller.model_name,
        attempt=state.attempt_number,
        delay_s=round(state.upcoming_sleep, 3),
        error=redact(f"{type(error).__name__}: {error}")[:500],
        step_id=caller.step_id,
    )


def _error(state: RetryCallState) -> BaseException:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    return error if error is not None else RuntimeError("no outcome")


def _delay(exc: BaseException, policy: RetryOptions, number: int) -> float | None:
    """How long to wait before attempt ``number + 1``; ``None``: do not retry."""
    if number >= policy.max_attempts or not is_transient(exc):
        return None
    asked = retry_after(exc)
    if asked is not None:
        return asked if asked <= MAX_RETRY_AFTER_S else None
    backoff: float = min(policy.max_delay_s, policy.initial_delay_s * 2.0 ** (number - 1))
    return backoff + random.uniform(0, policy.jitter_s)


async def _stream_once(
    scope: CallScope, caller: Caller, messages: Sequence[BaseMessage], brief: Brief
) -> AIMessage:
    model, agent, step_id = caller.model, caller.agent, caller.step_id
    with briefed(brief):
        if not streams(model):  # one reply, one token event: skip the chunk machinery
            direct = direct_call(model, messages)
            reply = await (direct() if direct else model.ainvoke(list(messages)))
            message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply.content)
            if message.text:
                scope.emit(TokenDelta, agent, agent=agent, text=message.text, step_id=step_id)
            return message
        chunks: list[AIMessageChunk] = []
        settings = scope.models.settings
        frames = Frames(
            lambda text: scope.emit(TokenDelta, agent, agent=agent, text=text, step_id=step_id),
            settings.token_frame_ms / 1000,
            settings.token_frame_chars,
        )
        light = direct_stream(model, messages)
        try:
            async for chunk in light() if light else model.astream(list(messages)):
                if not isinstance(chunk, AIMessageChunk):
                    chunk = AIMessageChunk(**chunk.model_dump(exclude={"type"}))
                if text := chunk.text:  # plain text, or the text blocks of a list (Anthropic)
                    frames.add(text)
                chunks.append(chunk)
        finally:
            frames.flush()  # what was streamed goes out before the call's other events
    if not chunks:
        return AIMessage(content="")
    merged = chunks[0] + chunks[1:]  # one merge, not one message built per chunk
    return AIMessage(
        content=merged.content,
        tool_calls=merged.tool_calls,
        additional_kwargs=merged.additional_kwargs,  # a refusal, reasoning, ...
        usage_metadata=merged.usage_metadata,
        response_metadata=merged.response_metadata,
        id=merged.id,
    )


def _validated(schema: Schema, parsed: Any, parsing_error: Any) -> tuple[Any, str]:
    if parsing_error is not None:
        return None, str(parsing_error)
    if parsed is None:
        return None, "no structured output was returned"
    if isinstance(schema, dict):
        try:
            jsonschema.validate(parsed, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(map(str, exc.absolute_path)) or "<root>"
            return None, f"{where}: {exc.message}"
    return parsed, ""


def _revive(schema: Schema, parsed: Any) -> Any:
    """A recorded structured value as the schema's type again."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate(parsed)
    return parsed


# --- frames ------------------------------------------------------------------------------------
# Token frames: a model's streamed text as few events as a reader needs. The first piece goes out
# at once (time to first token is unchanged); later pieces wait at most ``interval`` seconds and
# go out together, or as soon as ``chars`` characters wait. The frames join to the text the model
# wrote, exactly, so a replay of the events reproduces it.
class Frames:
    """Collects streamed text and hands it to ``send`` in frames (``interval`` 0: every piece
    as it comes)."""

    def __init__(self, send: Callable[[str], object], interval: float, chars: int) -> None:
        self.send, self.interval, self.chars = send, interval, chars
        self.waiting: list[str] = []
        self.size = 0
        self.sent_at = float("-inf")
        self.timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        self.waiting.append(text)
        self.size += len(text)
        since = time.monotonic() - self.sent_at
        if self.size >= self.chars or since >= self.interval:
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.interval - since, self.flush)

    def flush(self) -> None:
        """Send what waits now (nothing waits: nothing is sent)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiting:
            text, self.waiting, self.size = "".join(self.waiting), [], 0
            self.sent_at = time.monotonic()
            self.send(text)


# --- finish ------------------------------------------------------------------------------------
# Why a model stopped, in one vocabulary whatever the provider said: ``stop``, ``length`` (cut by
# the output limit), ``tool_calls``, ``content_filter``, ``refusal`` (or the provider's own word
# when it is none of these; empty when it said nothing).
_WORDS = {
    "stop": "stop",  # OpenAI, Ollama
    "end_turn": "stop",  # Anthropic
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "length": "length",  # OpenAI, Ollama
    "max_tokens": "length",  # Anthropic
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "refusal",
}
DECLINED = ("refusal", "content_filter")


def stop_reason(reply: AIMessage) -> str:
    """Why ``reply`` ended (see the module's docstring)."""
    if reply.additional_kwargs.get("refusal"):
        return "refusal"
    meta = reply.response_metadata
    said = meta.get("finish_reason") or meta.get("stop_reason") or meta.get("done_reason") or ""
    return _WORDS.get(str(said), str(said))


def check_declined(reply: AIMessage, model: str) -> None:
    """Raise :class:`ModelCallFailed` when the model declined to answer (a refusal, a content
    filter) and gave nothing else: the step fails with the model's words, not an empty answer."""
    reason = stop_reason(reply)
    if reason not in DECLINED or reply.tool_calls:
        return
    said = str(reply.additional_kwargs.get("refusal") or reply.text or "").strip()
    raise ModelCallFailed(f"{model} declined to answer ({reason})" + (f": {said}" if said else ""))
