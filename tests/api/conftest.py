"""The HTTP API in-process (httpx over ASGI), against SQLite and PostgreSQL alike."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from teamgraph.config import Settings
from teamgraph.server.app import create_app

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "Sup3r-secret!"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/api.db"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def api_settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        teams_dirs=[str(REPO / "examples" / "teams")],
        jwt_secret="test-secret-that-is-long-enough-for-hs256",
        knowledge_path=tmp_path / "knowledge.db",
    )


@pytest.fixture
async def app(api_settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(api_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


@dataclass
class User:
    email: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def make_user(client: httpx.AsyncClient, email: str) -> User:
    response = await client.post(
        "/api/v1/auth/register", json={"email": email, "password": PASSWORD}
    )
    assert response.status_code == 201, response.text
    login = await client.post("/api/v1/auth/login", data={"username": email, "password": PASSWORD})
    assert login.status_code == 200, login.text
    client.cookies.clear()  # tests authenticate explicitly (the log-in cookie has its own tests)
    return User(email, login.json()["access_token"])


async def make_session(client: httpx.AsyncClient, user: User, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/auth/session", json=body, headers=user.headers)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


@pytest.fixture
async def alice(client: httpx.AsyncClient) -> User:
    return await make_user(client, "alice@example.com")


@pytest.fixture
async def bob(client: httpx.AsyncClient) -> User:
    return await make_user(client, "bob@example.com")


SLOW_TEAM = """\
name: slow
description: A workflow whose model takes 0.2 s a call.
pattern: workflow
model: offline
model_kwargs: {latency: 0.2}
members: [researcher, writer]
"""


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 in a thread of its own (``options``: uvicorn's
    config); its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", loop="asyncio", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
