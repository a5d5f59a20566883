"""The real server in a subprocess and the system Chromium driven by Playwright.

Chromium is Debian's (``/usr/bin/chromium``, installed by ``make test``); without it these
tests skip outside CI and fail in CI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.helpers import PROCESS_CEILING_S

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHROMIUM = os.environ.get("TEAMGRAPH_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("TEAMGRAPH_SCREENSHOTS", REPO / "build" / "screenshots"))
PASSWORD = "Sup3r-secret!"
# How long a step waits for the page (an element, a status, an assertion to hold) before the test
# fails: a ceiling against hangs only, as generous as a loaded machine needs. Playwright's own
# default for ``expect`` is 5 s, which a busy CI machine exceeds.
UI_CEILING_MS = 60_000
expect.set_options(timeout=UI_CEILING_MS)
# What the workplace's closed network and a root user need (no sandbox, no background calls).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``teamgraph serve`` on a free port: SQLite, offline model, the example teams plus the
    browser tests' teams (approvals, clarification, a slow team), rate limits lifted."""
    home = tmp_path_factory.mktemp("server")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        PYTHONPATH=str(REPO),
        DATABASE_URL=f"sqlite:///{home}/server.db",
        TEAMGRAPH_DEFAULT_MODEL="offline",
        TEAMGRAPH_JWT_SECRET="browser-tests-secret-long-enough-for-hs256",
        TEAMGRAPH_KNOWLEDGE_PATH=str(home / "knowledge.db"),
        TEAMGRAPH_TEAMS_DIRS=json.dumps([str(REPO / "examples/teams"), str(HERE / "teams")]),
        TEAMGRAPH_RATE_LIMITS=json.dumps(
            {g: "100000/minute" for g in ("chat", "stream", "register", "login")}
        ),
    )
    env.pop("OPENAI_BASE_URL", None)
    log = home / "server.log"
    teamgraph = Path(sys.executable).parent / "teamgraph"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(teamgraph), "serve", "--port", str(port)],
            cwd=home,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield Server(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + PROCESS_CEILING_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server did not become healthy:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required in CI: {CHROMIUM} is missing (see make test)")
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Console:
    """What the page said on its console, and errors it threw."""

    errors: list[str] = field(default_factory=list)


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def page(browser: Any, server: Server, console: Console) -> Iterator[Any]:
    """A fresh browser context on the server; fails the test on any console error. The page's
    CSP is bypassed so that Playwright can evaluate its probes: the rendering itself must be
    safe without it (the XSS test proves that), the CSP is a second line tested on its own."""
    context = browser.new_context(
        base_url=server.url, viewport={"width": 1440, "height": 900}, bypass_csp=True
    )
    context.set_default_timeout(UI_CEILING_MS)
    tab = context.new_page()
    tab.on("console", lambda m: m.type == "error" and console.errors.append(m.text))
    tab.on("pageerror", lambda e: console.errors.append(f"uncaught: {e}"))
    yield tab
    context.close()
    assert console.errors == [], f"console errors: {console.errors}"


def new_email() -> str:
    return f"user-{uuid.uuid4().hex[:10]}@example.com"
