"""A team as an OpenAI model: ``GET /v1/models`` (the served teams), ``GET /v1/models/{team}``
and ``POST /v1/chat/completions`` (``model`` = a team's name), streamed or not, for the
``openai`` SDKs and every tool that takes an OpenAI base URL.

The client sends the whole conversation each time; the server keeps it as a session, and never
joins two conversations silently. A request continues a session (its thread: the team remembers,
and an answer to a question the run asked resumes the run — the last user message is a chat
:class:`~teamgraph.server.turns.Start`) when it names it — the ``X-Teamgraph-Session`` header or
``metadata.session_id`` (the ``teamgraph.session_id`` of an answer), or ``metadata.previous_id``
(an answer's ``id`` echoed back) — or when its earlier messages are the conversation of exactly
one of the user's sessions (per ``user``, the end user, when the request gives it). When they
could be two conversations (two that started with the same words), a new session starts.
While the session's run waits for decisions on tool calls, a last user message ``approve`` or
``reject`` decides them (:func:`~.reply.chat_intent`).

The team's final answer is the assistant message; its progress (plan,
steps, tools) is left out, or sent as ``reasoning_content`` deltas with ``"progress":
"reasoning"`` in the request body. Every error under ``/v1/`` has OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}`` (:data:`ERROR_SHAPE`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, status
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.events import Event
from teamgraph.result import RunResult
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.http_errors import ErrorShape
from teamgraph.server.protocols.adapter import EventStream
from teamgraph.server.protocols.reply import ChatReply, chat_intent
from teamgraph.server.schemas import no_nul
from teamgraph.server.sse import frame
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, follow, open_turn, remember_pause
from teamgraph.status import PAUSED
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])
_ERROR_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "invalid_value"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
}


class OpenAIError(HTTPException):
    """An error of the OpenAI-compatible routes: its ``code`` and ``param`` as OpenAI names
    them (e.g. ``model_not_found``, ``model``)."""

    def __init__(
        self, status_code: int, message: str, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(status_code, detail=message)
        self.code = code
        self.param = param


def openai_error(
    status_code: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    """An error in OpenAI's shape (its SDKs read ``error.message``, ``type`` and ``code``)."""
    kind, default_code = _ERROR_TYPES.get(
        status_code, ("server_error" if status_code >= 500 else "invalid_request_error", None)
    )
    body: dict[str, Any] = {
        "message": message,
        "type": kind,
        "param": param,
        "code": code or default_code,
    }
    return JSONResponse({"error": body}, status_code=status_code)


ERROR_SHAPE = ErrorShape("/v1/", openai_error)
Role = Literal["system", "developer", "user", "assistant", "tool"]


class Message(BaseModel):
    """An OpenAI chat message; ``content`` as text or as parts (their text is read)."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _storable(self) -> Message:
        no_nul(self.text)  # PostgreSQL cannot store NUL characters
        return self

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class CompletionRequest(BaseModel):
    """The fields teamgraph reads; the rest (``temperature``, ``max_tokens``, …) are accepted
    and ignored: the team's own model settings apply."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200, description="A served team's name.")
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    progress: Literal["none", "reasoning"] = Field(
        default="none", description="teamgraph: send the run's progress as reasoning_content."
    )
    user: str | None = Field(
        default=None, max_length=256, description="The end user: conversations are theirs."
    )
    metadata: dict[str, str] | None = Field(
        default=None,
        description="teamgraph reads session_id (continue that session) and previous_id (the "
        "id of the answer this request follows).",
    )


@router.get("/models")
async def models(user: CurrentUser, state: State) -> dict[str, Any]:
    """Every served team, as a model."""
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "teamgraph"}
        for name in sorted(state.teams)
    ]
    return {"object": "list", "data": data}


@router.get("/models/{model_id}")
async def model(model_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    """One served team, as a model (``models.retrieve``)."""
    if model_id not in state.teams:
        raise OpenAIError(
            status.HTTP_404_NOT_FOUND,
            f"The model {model_id!r} does not exist: GET /v1/models lists the teams served.",
            code="model_not_found",
            param="model",
        )
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "teamgraph"}


@router.post("/chat/completions", response_model=None)
async def completions(
    body: CompletionRequest,
    user: CurrentUser,
    state: State,
    db: Db,
    x_teamgraph_session: Annotated[
        str | None, Header(max_length=64, description="The session this request continues.")
    ] = None,
) -> dict[str, Any] | StreamingResponse:
    if body.model not in state.teams:
        raise OpenAIError(
            status.HTTP_404_NOT_FOUND,
            f"The model {body.model!r} does not exist: GET /v1/models lists the teams served.",
            code="model_not_found",
            param="model",
        )
    *history, last = body.messages
    if last.role != "user" or not last.text.strip():
        raise OpenAIError(400, "The last message must be the user's, with text.", param="messages")
    named = x_teamgraph_session or (body.metadata or {}).get("session_id")
    session = await _conversation(state, db, user.id, body, history, named)
    await db.close()  # give the request's connection back: a whole run needs the pool
    opened = await open_turn(
        state, await chat_intent(state, session, last.text), session, body.model
    )
    if body.stream:
        return CompletionChunks(state, opened, session, body).response()
    turn = await follow(state, opened)
    approvals = bool(turn.approvals or opened.waiting)
    answer = _with_pause_note(turn.answer, turn.run_id, turn.result, turn.paused, approvals)
    await _remember(state, session, body, answer, turn.run_id, turn.paused)
    return {
        "id": f"chatcmpl-{turn.run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(turn.result),
        "teamgraph": _about(turn.run_id, session, turn.result),
    }


Chunk = dict[str, Any] | None  # the fields of one chat.completion.chunk; None: [DONE]


class CompletionChunks(EventStream[Chunk]):
    """``data:`` lines of ``chat.completion.chunk`` objects as the run goes, then
    ``data: [DONE]``: the answer as ``content`` deltas (progress as ``reasoning_content`` when
    asked), the finish with teamgraph's run, usage when ``stream_options.include_usage``."""

    def __init__(
        self, state: AppState, turn: Opened, session: SessionRow, body: CompletionRequest
    ) -> None:
        super().__init__(state, turn)
        self.session, self.body = session, body
        self.reply = ChatReply(state.teams[turn.team or body.model].spec.pattern, separate=True)
        self.said = turn.notice  # the session's run waits for a decision: the turn says so
        self.base = {
            "id": f"chatcmpl-{turn.run_id}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.model,
        }

    async def on_start(self) -> AsyncIterator[Chunk]:
        yield self._delta({"role": "assistant", "content": ""})
        if self.said:
            yield self._delta({"content": self.said})

    def on_event(self, event: Event) -> Iterable[Chunk]:
        kind, text = self.reply.piece(event)
        if text and kind == "answer":
            self.said += text
            return (self._delta({"content": text}),)
        if text and self.body.progress == "reasoning":
            return (self._delta({"reasoning_content": text}),)
        return ()

    async def on_end(self) -> AsyncIterator[Chunk]:
        if not self.turn.notice and (rest := self.reply.closing()):
            self.said += rest
            yield self._delta({"content": rest})
        result = await self.result()
        paused = bool(self.said and (self.turn.notice or self.reply.pause))
        approvals = bool(self.reply.approvals or self.turn.waiting)
        full = _with_pause_note(self.said, self.turn.run_id, result, paused, approvals)
        if full != self.said:
            yield self._delta({"content": full[len(self.said) :]})
        await _remember(self.state, self.session, self.body, full, self.turn.run_id, paused)
        finished = [{"index": 0, "delta": {}, "finish_reason": "stop"}]
        yield {"choices": finished, "teamgraph": _about(self.turn.run_id, self.session, result)}
        if self.body.stream_options is not None and self.body.stream_options.include_usage:
            yield {"choices": [], "usage": _usage(result)}
        yield None

    def encode(self, chunk: Chunk) -> str:
        if chunk is None:
            return frame(None, "[DONE]")
        return frame(None, json.dumps({**self.base, **chunk}, ensure_ascii=False))

    @staticmethod
    def _delta(delta: dict[str, Any]) -> Chunk:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def _usage(result: RunResult) -> dict[str, int]:
    used = result.usage
    return {
        "prompt_tokens": used.input_tokens,
        "completion_tokens": used.output_tokens,
        "total_tokens": used.input_tokens + used.output_tokens,
    }


def _about(run_id: str, session: SessionRow, result: RunResult) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "session_id": session.id,
        "status": result.status,
        "cost_usd": result.usage.cost_usd,
    }


def _with_pause_note(
    answer: str, run_id: str, result: RunResult, paused: bool, approvals: bool = False
) -> str:
    """A paused run's message says so, and how to go on (``approvals``: it waits for
    decisions on tool calls)."""
    if not paused and result.status not in PAUSED:
        return answer
    if approvals:
        how = (
            'Reply "approve" or "reject" (a reason may follow a colon: "reject: not now") to '
            "decide the waiting tool calls"
        )
    else:
        how = "Reply in this conversation to answer its question"
    return f"{answer}\n\n(teamgraph: run {run_id} is paused. {how}.)"


def conversation_key(messages: Sequence[tuple[str, str]], end_user: str | None = None) -> str:
    """The hash of a conversation's user and assistant messages (system prompts aside), and of
    its end user when the request names one."""
    kept: list[Any] = [[r, t.strip()] for r, t in messages if r in ("user", "assistant")]
    if end_user:
        kept.insert(0, ["end_user", end_user])
    return hashlib.sha256(json.dumps(kept, ensure_ascii=False).encode()).hexdigest()


async def _conversation(
    state: AppState,
    db: AsyncSession,
    user_id: str,
    body: CompletionRequest,
    history: Sequence[Message],
    named: str | None,
) -> SessionRow:
    """The session the request continues: the one it names (``named``, or the session of the
    answer ``metadata.previous_id``), else the one session of the user on the team whose
    conversation ``history`` is; a new one when there is none — or more than one."""
    previous = (body.metadata or {}).get("previous_id")
    if named is None and previous is not None:
        named = await _session_of_answer(state, user_id, previous)
    if named is not None:
        found = await repo.owned_session(db, user_id, named)
        if found is None or found.team != body.model:
            raise OpenAIError(
                status.HTTP_404_NOT_FOUND,
                f"No conversation {named!r} of yours with the model {body.model!r}.",
            )
        return found
    if any(m.role in ("user", "assistant") for m in history):
        key = conversation_key([(m.role, m.text) for m in history], body.user)
        matches = await repo.conversation_sessions(db, user_id, body.model, key)
        if len(matches) == 1:
            return matches[0]
    return await repo.create_session(db, user_id, team=body.model, name="OpenAI API")


async def _session_of_answer(state: AppState, user_id: str, answer_id: str) -> str:
    """The session of the user's answer ``chatcmpl-<run id>`` (404 for any other)."""
    run = await state.backend.runs.owned(answer_id.removeprefix("chatcmpl-"), user_id)
    if run is None or run.session_id is None:
        raise OpenAIError(
            status.HTTP_404_NOT_FOUND,
            f"No conversation with an answer {answer_id!r} of yours.",
            param="metadata.previous_id",
        )
    return run.session_id


async def _remember(
    state: AppState,
    session: SessionRow,
    body: CompletionRequest,
    answer: str,
    run_id: str,
    paused: bool,
) -> None:
    """The conversation so far, as the client will send it back next time, keys the session;
    a paused run's message joins the session's history (a finished run's is stored already)."""
    said = [*((m.role, m.text) for m in body.messages), ("assistant", answer)]
    key = conversation_key(said, body.user)
    await repo.keep_conversation_key(state.backend.direct, session.id, key)
    if paused:
        await remember_pause(state, session.id, answer, run_id)
