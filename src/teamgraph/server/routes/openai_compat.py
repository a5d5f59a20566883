"""A team as an OpenAI model: ``GET /v1/models`` (the served teams) and
``POST /v1/chat/completions`` (``model`` = a team's name), streamed or not, for the ``openai``
SDKs and every tool that takes an OpenAI base URL.

The client sends the whole conversation each time; the server keeps it as a session: a request
whose earlier messages are a conversation this server answered continues that session (its
thread: the team remembers, and an answer to a question the run asked resumes the run);
otherwise the last user message starts a new session. The team's final answer is the assistant
message; its progress (plan, steps, tools) is left out, or sent as ``reasoning_content`` deltas
with ``"progress": "reasoning"`` in the request body. Errors have OpenAI's shape
(:mod:`teamgraph.server.errors`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from fastapi import APIRouter, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from teamgraph.result import RunResult
from teamgraph.server import repositories as repo
from teamgraph.server.deps import CurrentUser, Db, State
from teamgraph.server.errors import OpenAIError
from teamgraph.server.progress import Telling
from teamgraph.server.schemas import no_nul
from teamgraph.server.sse import one_line
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, chat_turn, open_turn, remember_pause
from teamgraph.status import PAUSED
from teamgraph.storage.models import SessionRow

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])
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


@router.get("/models")
async def models(user: CurrentUser, state: State) -> dict[str, Any]:
    """Every served team, as a model."""
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "teamgraph"}
        for name in sorted(state.teams)
    ]
    return {"object": "list", "data": data}


@router.post("/chat/completions", response_model=None)
async def completions(
    body: CompletionRequest, user: CurrentUser, state: State, db: Db
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
    session = await _conversation(db, user.id, body.model, history)
    await db.close()  # give the request's connection back: a whole run needs the pool
    if body.stream:
        opened = await open_turn(state, user.id, session, body.model, last.text)
        return StreamingResponse(
            _chunks(state, session, opened, body), media_type="text/event-stream"
        )
    turn = await chat_turn(state, user.id, session, body.model, last.text)
    answer = _with_pause_note(turn.answer, turn.run_id, turn.result, turn.paused)
    await _remember(state, session, body.messages, answer, turn.run_id, turn.paused)
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


async def _chunks(
    state: AppState, session: SessionRow, opened: Opened, body: CompletionRequest
) -> AsyncIterator[str]:
    """``data:`` lines of ``chat.completion.chunk`` objects as the run goes, then ``[DONE]``."""
    chunk = _Chunker(f"chatcmpl-{opened.run_id}", body.model)
    yield chunk.delta({"role": "assistant", "content": ""})
    telling = Telling(state.teams[opened.team].spec.pattern, separate=True)
    said = opened.notice  # the session's run waits for a decision: the turn says so
    if said:
        yield chunk.delta({"content": said})
    else:
        async for event in state.runs.events(opened.run_id, opened.after_seq):
            kind, text = telling.piece(event)
            if text and kind == "answer":
                said += text
                yield chunk.delta({"content": text})
            elif text and body.progress == "reasoning":
                yield chunk.delta({"reasoning_content": text})
        if rest := telling.closing():
            said += rest
            yield chunk.delta({"content": rest})
    result = await state.runs.runner(opened.team).result(opened.run_id)
    paused = bool(said and (opened.notice or telling.pause))
    full = _with_pause_note(said, opened.run_id, result, paused)
    if full != said:
        yield chunk.delta({"content": full[len(said) :]})
    await _remember(state, session, body.messages, full, opened.run_id, paused)
    yield chunk.finish(_about(opened.run_id, session, result))
    if body.stream_options is not None and body.stream_options.include_usage:
        yield chunk.usage(_usage(result))
    yield "data: [DONE]\n\n"


class _Chunker:
    def __init__(self, completion_id: str, model: str) -> None:
        self.base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

    def _line(self, **fields: Any) -> str:
        return f"data: {one_line(json.dumps({**self.base, **fields}, ensure_ascii=False))}\n\n"

    def delta(self, delta: dict[str, Any]) -> str:
        return self._line(choices=[{"index": 0, "delta": delta, "finish_reason": None}])

    def finish(self, about: dict[str, Any]) -> str:
        return self._line(
            choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}], teamgraph=about
        )

    def usage(self, usage: dict[str, int]) -> str:
        return self._line(choices=[], usage=usage)


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


def _with_pause_note(answer: str, run_id: str, result: RunResult, paused: bool) -> str:
    """A paused run's message says so, and how to go on."""
    if not paused and result.status not in PAUSED:
        return answer
    return (
        f"{answer}\n\n(teamgraph: run {run_id} is paused. Reply in this conversation to answer "
        f"its question; a tool call waiting for approval is decided with POST "
        f"/api/v1/runs/{run_id}/resume.)"
    )


def conversation_key(messages: Sequence[tuple[str, str]]) -> str:
    """The hash of a conversation's user and assistant messages (system prompts aside)."""
    kept = [[role, text.strip()] for role, text in messages if role in ("user", "assistant")]
    return hashlib.sha256(json.dumps(kept, ensure_ascii=False).encode()).hexdigest()


async def _conversation(
    db: AsyncSession, user_id: str, team: str, history: Sequence[Message]
) -> SessionRow:
    """The user's session on ``team`` whose conversation ``history`` is, else a new one."""
    if any(m.role in ("user", "assistant") for m in history):
        key = conversation_key([(m.role, m.text) for m in history])
        query = select(SessionRow).where(
            SessionRow.user_id == user_id,
            SessionRow.team == team,
            SessionRow.conversation_key == key,
        )
        found = (await db.scalars(query)).first()
        if found is not None:
            return found
    return await repo.create_session(db, user_id, team=team, name="OpenAI API")


async def _remember(
    state: AppState,
    session: SessionRow,
    messages: Sequence[Message],
    answer: str,
    run_id: str,
    paused: bool,
) -> None:
    """The conversation so far, as the client will send it back next time, keys the session;
    a paused run's message joins the session's history (a finished run's is stored already)."""
    said = [*((m.role, m.text) for m in messages), ("assistant", answer)]
    keyed = update(SessionRow).where(SessionRow.id == session.id)
    await state.backend.direct.write(keyed.values(conversation_key=conversation_key(said)))
    if paused:
        await remember_pause(state, session.id, answer, run_id)
