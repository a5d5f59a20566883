"""A fake model provider on 127.0.0.1 speaking OpenAI, Anthropic and Ollama's wire protocols at
once, answering by script, else by :mod:`.brain`. It runs in a thread of its own (its own event
loop), so clients in the test's loop, in other threads or in child processes can reach it."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import wire_anthropic, wire_ollama, wire_openai
from .brain import SENT_HEADER, brief_of, think
from .model import Answer, Fail, Hang, Refuse, Request, Reset, Say, Scripted, call_id

WIRES: dict[str, ModuleType] = {
    "openai": wire_openai,
    "anthropic": wire_anthropic,
    "ollama": wire_ollama,
}
MEDIA = {
    "openai": "text/event-stream",
    "anthropic": "text/event-stream",
    "ollama": "application/x-ndjson",
}


@dataclass
class Served:
    """A request and what it got (``answer`` is None for scripted errors)."""

    request: Request
    answer: Answer | None
    at: float  # time.monotonic() when it arrived
    sent: float  # when the client sent it (what a client-side limiter governs)
    sent_first_token: float | None = None  # when the first text piece left
    sent_at: list[float] = field(default_factory=list)  # when each streamed chunk left


class FakeProvider:
    """``with FakeProvider() as fake:`` then point a client at ``fake.url(wire)``."""

    def __init__(self, *, piece_delay_s: float = 0.0) -> None:
        self.piece_delay_s = piece_delay_s  # between streamed chunks
        self.served: list[Served] = []
        self.errors: list[str] = []  # requests the fake could not read or answer
        self.in_flight = 0
        self.outage: tuple[int, Fail] | None = None  # after n answers, every request fails
        self.peak = 0  # most requests in flight at once
        self._script: list[tuple[str | None, Scripted]] = []
        self._lock = threading.Lock()
        routes = [
            Route(w.PATH, self._endpoint(name), methods=["POST"]) for name, w in WIRES.items()
        ]
        self.app = Starlette(routes=routes)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="critical", lifespan="off", loop="asyncio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def url(self, wire: str) -> str:
        """The base URL a client of ``wire`` is configured with."""
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if wire == "openai" else root

    # --- scripting ---------------------------------------------------------------------------
    def script(self, *items: Scripted, role: str | None = None) -> None:
        """The next requests (of briefs with ``role``, if given) get ``items``, in order."""
        with self._lock:
            self._script += [(role, item) for item in items]

    def fail_after(self, answers: int, fail: Fail) -> None:
        """An outage: once ``answers`` requests were answered, every request gets ``fail``."""
        self.outage = (answers, fail)

    def recover(self) -> None:
        self.outage = None

    def _next(self, request: Request) -> Scripted | None:
        if self.outage is not None and len(self.answered) >= self.outage[0]:
            return self.outage[1]
        role = request.brief.role if request.brief else None
        with self._lock:
            for i, (wanted, _) in enumerate(self._script):
                if wanted is None or wanted == role:
                    return self._script.pop(i)[1]
        return None

    # --- what was served ---------------------------------------------------------------------
    @property
    def answered(self) -> list[Served]:
        return [s for s in self.served if s.answer is not None]

    def billed(self) -> tuple[int, int]:
        """Input and output tokens reported across every answered request."""
        answers = [s.answer for s in self.answered if s.answer is not None]
        return sum(a.input_tokens for a in answers), sum(a.output_tokens for a in answers)

    # --- serving -----------------------------------------------------------------------------
    def _endpoint(self, wire: str) -> Any:
        codec = WIRES[wire]

        async def endpoint(http: HttpRequest) -> Response:
            body = json.loads(await http.body())
            headers = dict(http.headers)
            try:
                request = codec.decode(body, headers)
            except (KeyError, TypeError, ValueError) as exc:  # a 400 is not retried: tests see it
                self.errors.append(f"{wire}: {type(exc).__name__}: {exc}")
                return JSONResponse(codec.error(Fail(400, f"errors: {exc!r}")), 400)
            request.brief = brief_of(headers)
            now = time.monotonic()
            served = Served(request, None, now, float(headers.get(SENT_HEADER, now)))
            self.served.append(served)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            streaming = False
            try:
                response = await self._respond(request, served)
                streaming = isinstance(response, StreamingResponse)
                return response
            finally:
                if not streaming:
                    self.in_flight -= 1

        return endpoint

    async def _respond(self, request: Request, served: Served) -> Response:
        codec = WIRES[request.wire]
        item = self._next(request)
        if isinstance(item, Hang):
            await asyncio.sleep(item.seconds)
            item = None
        if isinstance(item, Fail):
            return JSONResponse(codec.error(item), item.status, headers=item.headers)
        if isinstance(item, Reset):
            return self._reset(item, request, codec)
        try:
            served.answer = self._answer(item, request).bill(request)
        except Exception as exc:  # a 400 is not retried: the test sees it at once
            self.errors.append(f"{request.wire}: cannot answer: {type(exc).__name__}: {exc}")
            return JSONResponse(codec.error(Fail(400, f"fake cannot answer: {exc!r}")), 400)
        if not request.stream:
            return JSONResponse(codec.reply(served.answer, request))
        pieces = _pieces(served.answer.refusal or served.answer.text)
        chunks = codec.stream(served.answer, request, pieces)
        paced = self._paced(chunks, served, pieces)
        return StreamingResponse(paced, media_type=MEDIA[request.wire])

    def _answer(self, item: Scripted | None, request: Request) -> Answer:
        if isinstance(item, Say):
            calls = [{"id": call_id(), **c} for c in item.tool_calls]
            return Answer(text=item.text, tool_calls=calls, finish=item.finish)
        if isinstance(item, Refuse):
            if request.wire == "openai":
                return Answer(refusal=item.text)
            return Answer(
                finish="content_filter" if request.wire == "anthropic" else None,
                text="" if request.wire == "anthropic" else item.text,
            )
        return think(request)

    async def _paced(
        self, chunks: Iterator[bytes], served: Served, pieces: list[str]
    ) -> AsyncIterator[bytes]:
        first = pieces[0].encode() if pieces else None
        try:
            for chunk in chunks:
                now = time.monotonic()
                if first is not None and served.sent_first_token is None and first[:3] in chunk:
                    served.sent_first_token = now
                served.sent_at.append(now)
                yield chunk
                if self.piece_delay_s:
                    await asyncio.sleep(self.piece_delay_s)
        finally:
            self.in_flight -= 1

    def _reset(self, item: Reset, request: Request, codec: ModuleType) -> Response:
        answer = Answer(text="partial answer that never ends " * 4).bill(request)
        chunks = codec.stream(answer, request, _pieces(answer.text))

        async def broken() -> AsyncIterator[bytes]:
            try:
                for _, chunk in zip(range(item.after), chunks, strict=False):
                    yield chunk
                raise ConnectionResetError("the fake provider drops the connection")
            finally:
                self.in_flight -= 1

        return StreamingResponse(broken(), media_type=MEDIA[request.wire])


def _pieces(text: str) -> list[str]:
    """Text as a provider streams it: a few characters at a time."""
    return re.findall(r"\S+\s*|\s+", text)
