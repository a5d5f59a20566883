"""The official JavaScript clients against the server served by uvicorn — the MCP TypeScript
SDK, ``@a2a-js/sdk`` and ``openai`` — when node is on the PATH and the packages are installed in
the folder ``TEAMGRAPH_JS_CLIENTS`` names (the tests reach no registry):

    npm install --prefix /path/to/js-clients @modelcontextprotocol/sdk @a2a-js/sdk openai
    TEAMGRAPH_JS_CLIENTS=/path/to/js-clients pytest tests/api/test_js_clients.py

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
CLIENTS = os.environ.get("TEAMGRAPH_JS_CLIENTS", "")
CHECKS = {
    "mcp": {"list", "call", "progress", "paused_text", "followup", "elicited_approval"},
    "a2a": {"stream", "input_required", "continued", "cancel"},
    "openai": {"retrieve", "not_found", "notice", "approved", "too_large"},
}
PACKAGES = {"mcp": "@modelcontextprotocol/sdk", "a2a": "@a2a-js/sdk", "openai": "openai"}

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not CLIENTS, reason="TEAMGRAPH_JS_CLIENTS names no folder of clients"),
]


@pytest.fixture
def server(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as base:
        yield base


@pytest.mark.parametrize("client", sorted(CHECKS))
def test_the_js_client_works(server: str, client: str, tmp_path: Path) -> None:
    folder = Path(CLIENTS)
    if not (folder / "node_modules" / PACKAGES[client]).is_dir():
        pytest.skip(f"{PACKAGES[client]} is not installed in {folder}")
    script = folder / f"teamgraph-{client}-{tmp_path.name}.mjs"  # resolves the folder's packages
    shutil.copy(SCRIPTS / f"{client}.mjs", script)
    key = str(new_key(server, login(server, f"js-{client}@example.com"))["key"])
    env = {**os.environ, "TEAMGRAPH_URL": server, "TEAMGRAPH_API_KEY": key}
    try:
        ran = subprocess.run(
            ["node", str(script)], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        script.unlink()
    assert ran.returncode == 0, ran.stderr
    checks = json.loads(ran.stdout.strip().splitlines()[-1])
    assert set(checks) == CHECKS[client] and all(checks.values()), checks
