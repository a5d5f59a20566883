"""A fake embeddings provider on 127.0.0.1: OpenAI's ``POST /v1/embeddings`` and Ollama's
``POST /api/embed``, answering with hashed bag-of-words vectors (texts sharing words are near),
or with an error while :attr:`FakeEmbeddings.failing` is set."""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

WORD = re.compile(r"\w+")


def bag_of_words(text: str, dimensions: int) -> list[float]:
    """A unit vector with one hashed bucket per word of ``text``."""
    vector = [0.0] * dimensions
    for word in WORD.findall(text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class FakeEmbeddings:
    """``with FakeEmbeddings() as fake:`` then point a client at ``fake.url(wire)``."""

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.failing = False
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (wire, body)
        app = Starlette(
            routes=[
                Route("/v1/embeddings", self._openai, methods=["POST"]),
                Route("/api/embed", self._ollama, methods=["POST"]),
            ]
        )
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="critical", lifespan="off", loop="asyncio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> FakeEmbeddings:
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def url(self, wire: str) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if wire == "openai" else root

    def texts(self, wire: str) -> list[str]:
        """Every text embedded over ``wire``, in order."""
        out: list[str] = []
        for seen, body in self.requests:
            if seen == wire:
                texts = body["input"]
                out += [texts] if isinstance(texts, str) else texts
        return out

    async def _openai(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(("openai", body))
        if self.failing:
            return JSONResponse({"error": {"message": "embeddings are down"}}, 503)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(t, self.dimensions)}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse(
            {"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    async def _ollama(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(("ollama", body))
        if self.failing:
            return JSONResponse({"error": "embeddings are down"}, 503)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        vectors = [bag_of_words(t, self.dimensions) for t in texts]
        return JSONResponse({"model": body["model"], "embeddings": vectors})
