"""The official JavaScript clients against the server served by uvicorn — the MCP TypeScript
SDK, ``@a2a-js/sdk`` and ``openai`` — when node is on the PATH and the packages are installed:
``make js-clients`` (part of ``make test``) installs the versions ``tests/api/js/package-lock.json``
pins into ``tests/api/js/node_modules`` (the tests themselves reach no registry);
``TEAMGRAPH_JS_CLIENTS`` may name another folder that has them.

Each script (``tests/api/js/``) prints its checks as JSON; every one must hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import serving
from .test_openai_compat import login, new_key

SCRIPTS = Path(__file__).parent / "js"
CLIENTS = Path(os.environ.get("TEAMGRAPH_JS_CLIENTS") or SCRIPTS)
CHECKS = {
    "mcp": {"list", "call", "progress", "paused_text", "followup", "elicited_approval"},
    "a2a": {"stream", "input_required", "continued", "cancel"},
    "openai": {"retrieve", "not_found", "notice", "approved", "too_large"},
}
PACKAGES = {"mcp": "@modelcontextprotocol/sdk", "a2a": "@a2a-js/sdk", "openai": "openai"}

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (CLIENTS / "node_modules").is_dir(), reason="no JS clients: make js-clients"
    ),
]


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


@pytest.mark.parametrize("client", sorted(CHECKS))
def test_the_js_client_works(server: str, client: str, tmp_path: Path) -> None:
    if not (CLIENTS / "node_modules" / PACKAGES[client]).is_dir():
        pytest.skip(f"{PACKAGES[client]} is not installed in {CLIENTS}")
    script = SCRIPTS / f"{client}.mjs"
    if CLIENTS != SCRIPTS:  # next to the packages, so node resolves them
        script = CLIENTS / f"teamgraph-{client}-{tmp_path.name}.mjs"
        shutil.copy(SCRIPTS / f"{client}.mjs", script)
    key = str(new_key(server, login(server, f"js-{client}@example.com"))["key"])
    env = {**os.environ, "TEAMGRAPH_URL": server, "TEAMGRAPH_API_KEY": key}
    try:
        ran = subprocess.run(
            ["node", str(script)], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        if CLIENTS != SCRIPTS:
            script.unlink()
    assert ran.returncode == 0, ran.stderr
    checks = json.loads(ran.stdout.strip().splitlines()[-1])
    assert set(checks) == CHECKS[client] and all(checks.values()), checks
