"""Processes of a deployment on the real PostgreSQL, for the scale-out and outage tests: API
processes (``serve --workers 0``) and ``teamgraph worker`` processes, each its own OS process,
and a user talking to them over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from teamgraph.config import EXAMPLE_TEAMS

from .helpers import PROCESS_CEILING_S

PASSWORD = "Sup3r-secret!"
LEASE_S = 2.0  # short leases and heartbeats: a dead worker's run moves within seconds
SLOW = """\
name: slow
description: A workflow whose model takes 0.25 s a call.
pattern: workflow
model: offline
model_kwargs: {latency: 0.25}
members: [researcher, writer]
"""
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """API processes and workers on one database; every process's output in ``logs``."""

    url: str
    teams: Path
    logs: Path
    apis: list[str] = field(default_factory=list)
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)  # pid → process
    health: dict[int, int] = field(default_factory=dict)  # worker pid → its health port
    extra: dict[str, str] = field(default_factory=dict)  # more environment for every process

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": self.url,
            "TEAMGRAPH_TEAMS_DIRS": json.dumps([str(EXAMPLE_TEAMS), str(self.teams)]),
            "TEAMGRAPH_JWT_SECRET": "scale-out-tests-share-one-signing-secret",
            "TEAMGRAPH_KNOWLEDGE_PATH": str(self.logs / "knowledge.db"),
            "TEAMGRAPH_LEASE_TTL_S": str(LEASE_S),
            "TEAMGRAPH_WORKER_STALLED_S": str(LEASE_S),
            "TEAMGRAPH_WORKER_HEARTBEAT_S": "0.5",
            "TEAMGRAPH_JSON_LOGS": "false",
            "TEAMGRAPH_OTEL_EXPORTER": "console",  # every process prints its spans
            **self.extra,
        }

    def spawn(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        out = (self.logs / f"{name}.log").open("ab")
        command = [sys.executable, "-m", "teamgraph", *args]
        return subprocess.Popen(command, env=self.env(), stdout=out, stderr=subprocess.STDOUT)

    def start_api(self) -> subprocess.Popen[bytes]:
        port = free_port()
        self.apis.append(f"http://127.0.0.1:{port}")
        return self.spawn("serve", "--workers", "0", "--port", str(port), name=f"api-{port}")

    def start_worker(self) -> subprocess.Popen[bytes]:
        port = free_port()
        process = self.spawn("worker", "--health-port", str(port), name=f"worker-{port}")
        self.workers[process.pid] = process
        self.health[process.pid] = port
        return process

    def wait_ready(self, timeout: float = PROCESS_CEILING_S) -> None:
        urls = [f"{api}/health" for api in self.apis]
        urls += [f"http://127.0.0.1:{port}/ready" for port in self.health.values()]
        until = time.monotonic() + timeout
        for url in urls:
            while True:
                try:
                    if httpx.get(url, timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > until:
                    raise AssertionError(f"{url} never came up; see {self.logs}")
                time.sleep(0.2)

    def gone(self, pid: int) -> subprocess.Popen[bytes]:
        """Forget a worker (killed or stopping); its process."""
        self.health.pop(pid)
        return self.workers.pop(pid)

    def holder(self, run_id: str) -> int:
        """The pid of the worker holding the run's lease (0: none)."""
        import psycopg

        with psycopg.connect(self.url) as conn:
            found = conn.execute("SELECT lease_owner FROM runs WHERE id = %s", (run_id,)).fetchone()
        owner = found[0] if found else None
        return int(owner.split(":")[1]) if owner else 0

    def spans(self, run_id: str) -> list[dict[str, Any]]:
        """The spans about ``run_id`` every process has printed so far."""
        found = []
        for log in self.logs.glob("*.log"):
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith('{"otel_span"'):
                    span = json.loads(line)
                    if span["attributes"].get("teamgraph.run_id") == run_id:
                        found.append(span)
        return found

    def report(self, run_ids: list[str]) -> str:
        """What a test that waited too long prints: the runs' rows and queue jobs as stored,
        and the last lines every process logged."""
        import psycopg

        lines = []
        with psycopg.connect(self.url) as conn:
            for run_id in run_ids:
                row = conn.execute(
                    "SELECT status, last_seq, lease_owner, lease_until, lease_epoch, updated_at"
                    " FROM runs WHERE id = %s",
                    (run_id,),
                ).fetchone()
                jobs = conn.execute(
                    "SELECT id, queue_name, status, worker_id, attempts FROM procrastinate_jobs"
                    " WHERE args->>'run_id' = %s ORDER BY id",
                    (run_id,),
                ).fetchall()
                lines.append(f"run {run_id}: {row}; jobs {jobs}")
        lines += [f"worker {pid}: exit code {p.poll()}" for pid, p in self.workers.items()]
        for log in sorted(self.logs.glob("*.log")):
            told = [
                line
                for line in log.read_text(errors="replace").splitlines()
                if line[:2] == "20"  # a log line, not a span's JSON
            ]
            lines += [f"--- {log.name}", *told[-60:]]
        return "\n".join(lines)

    def stop(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.kill()


def make_database() -> str:
    import uuid

    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL is not reachable at 127.0.0.1:5432 ({exc})")
    name = f"tg_scale_{uuid.uuid4().hex[:10]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


def drop_database(url: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Client:
    """One user talking to the cluster's API processes."""

    http: httpx.AsyncClient
    token: str = ""
    session: str = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def start(self, api: str, team: str = "slow", text: str = REQUEST) -> str:
        made = await self.http.post(
            f"{api}/api/v1/auth/session", json={"team": team}, headers=self.headers
        )
        assert made.status_code == 201, made.text
        self.session = made.json()["session_id"]
        started = await self.http.post(
            f"{api}/api/v1/sessions/{self.session}/runs", json={"input": text}, headers=self.headers
        )
        assert started.status_code == 202, started.text
        assert started.json()["status"] == "pending"  # queued: a worker executes it
        return str(started.json()["run_id"])

    async def events(self, api: str, run_id: str, after: int = 0) -> AsyncIterator[dict[str, Any]]:
        url = f"{api}/api/v1/runs/{run_id}/events?after={after}"
        async with self.http.stream("GET", url, headers=self.headers) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    yield json.loads(line[6:])

    async def status(self, api: str, run_id: str) -> str:
        got = await self.http.get(f"{api}/api/v1/runs/{run_id}", headers=self.headers)
        return str(got.json()["status"])
