"""The LangGraph JS SDK (``@langchain/langgraph-sdk``, what agent-chat-ui's ``useStream`` is
built on) against the server: ``tests/clients/langgraph_sdk_client.cjs``. Runs when ``node`` is
installed and ``TEAMGRAPH_NODE_PATH`` names a ``node_modules`` holding the SDK (the tests never
install it: no network); skipped otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import REPO, serving
from .test_openai_compat import login, new_key

NODE = shutil.which("node")
MODULES = os.environ.get("TEAMGRAPH_NODE_PATH", "")
SCRIPT = REPO / "tests" / "clients" / "langgraph_sdk_client.cjs"


def _sdk_found() -> bool:
    if not NODE or not MODULES:
        return False
    found = subprocess.run(
        [NODE, "-e", "require.resolve('@langchain/langgraph-sdk')"],
        env={**os.environ, "NODE_PATH": MODULES},
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


pytestmark = pytest.mark.skipif(
    not _sdk_found(), reason="node and TEAMGRAPH_NODE_PATH with @langchain/langgraph-sdk needed"
)


@pytest.fixture
def base(api_settings: Settings) -> Iterator[str]:
    with serving(create_app(api_settings)) as url:
        yield url


def test_the_js_sdk_reads_interrupts_and_decides_them_as_use_stream_does(base: str) -> None:
    key = new_key(base, login(base, "js@example.com"))["key"]
    env = {**os.environ, "NODE_PATH": MODULES, "BASE": base, "KEY": key}
    ran = subprocess.run(
        [str(NODE), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip() == "ok"
