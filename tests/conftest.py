"""Test-wide guards: no network, no real model clients; a fresh database per test."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamgraph.config import Settings

_real_connect = socket.socket.connect
_LOCAL = ("127.", "::1", "localhost")


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family == socket.AF_UNIX or (
        isinstance(address, tuple) and str(address[0]).startswith(_LOCAL)
    ):
        return _real_connect(self, address)
    raise RuntimeError(f"tests must not touch the network (tried to connect to {address!r})")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture(autouse=True)
def _no_real_models(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("allow_model_construction"):
        return

    def refuse(model: str, **kwargs: Any) -> Any:
        raise RuntimeError(f"tests must not build real model clients (asked for {model!r})")

    monkeypatch.setattr("teamgraph.llm.resolve._init_chat_model", refuse)
    monkeypatch.setattr("teamgraph.embeddings._init_embeddings", refuse)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for var in (
        "DATABASE_URL",
        "TEAMGRAPH_DATABASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "TEAMGRAPH_DEFAULT_MODEL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TEAMGRAPH_DEBUG", "")  # `--debug` in one test sets it: undone after
    monkeypatch.chdir(tmp_path)  # never read or write ./teamgraph.db or ./.env of the checkout
    yield


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/teamgraph.db")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "allow_model_construction: the test builds (but never calls) a real client"
    )


PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the local server, dropped afterwards. Skipped only when
    the server is unreachable outside CI; in CI it is required."""
    import os
    import uuid

    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL is not reachable at 127.0.0.1:5432 ({exc})")
    name = f"tg_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
