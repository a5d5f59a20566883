"""Property-based fuzzing of every operation in the app's OpenAPI schema (schemathesis, in
process): whatever the generated request — valid or not, authenticated — no response is a 5xx.

Deterministic (``derandomize``) and bounded (``MAX_EXAMPLES`` per operation and mode), so the run is
reproducible and short. Schemathesis drives the ASGI app from its own event-loop thread and runs
its lifespan there, so this test is synchronous.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Ok
from schemathesis.python import asgi

from teamgraph.config import Settings
from teamgraph.server.app import create_app

from .conftest import PASSWORD

MAX_EXAMPLES = 15
RUN_PATHS = ("/api/v1/sessions/", "/api/v1/runs/")
NUL = "PostgreSQL refuses NUL bytes in text and this free-text field lets them through"
# 5xx found by this test in routes owned elsewhere, matched by operation and error: they make
# the test xfail (listed) until fixed; any other 5xx fails it. Remove an entry once it is fixed.
KNOWN_5XX: dict[str, tuple[str, str]] = {}  # every 5xx found so far is fixed
GENEROUS = {group: "100000/second" for group in ("chat", "stream", "register", "login")}
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


@pytest.fixture
def fuzzed_app(api_settings: Settings) -> Iterator[FastAPI]:
    # rate limits stay installed (their code runs) but never trip during fuzzing
    yield create_app(api_settings.model_copy(update={"rate_limits": GENEROUS}))
    asgi.shutdown_lifespans()  # schemathesis started the lifespan on first use


@dataclass
class Login:
    headers: dict[str, str]  # a session token: for the user routes and the session-token routes
    ids: dict[str, str]  # a real session_id and run_id, for the runs operations


def login(schema: Any) -> Login:
    """Register and log in through the API, open a session and start a run in it."""
    email = "fuzz@example.com"
    registered = schema["/api/v1/auth/register"]["POST"].Case(
        body={"email": email, "password": PASSWORD}, media_type="application/json"
    )
    assert registered.call().status_code == 201
    form = schema["/api/v1/auth/login"]["POST"].Case(
        body={"username": email, "password": PASSWORD},
        media_type="application/x-www-form-urlencoded",
    )
    response = form.call()
    assert response.status_code == 200, response.text
    user = {"Authorization": f"Bearer {response.json()['access_token']}"}
    session = schema["/api/v1/auth/session"]["POST"].Case(body={}, media_type="application/json")
    created = session.call(headers=user)
    assert created.status_code == 201, created.text
    headers = {"Authorization": f"Bearer {created.json()['token']['access_token']}"}
    session_id = created.json()["session_id"]
    run = schema["/api/v1/sessions/{session_id}/runs"]["POST"].Case(
        path_parameters={"session_id": session_id},
        body={"input": "Compare PostgreSQL and MongoDB"},
        media_type="application/json",
    )
    started = run.call(headers=headers)
    assert started.status_code == 202, started.text
    return Login(headers, {"session_id": session_id, "run_id": started.json()["run_id"]})


def strategies(operation: Any, mode: GenerationMode, ids: dict[str, str]) -> list[Any]:
    """Generated path ids (mostly unknown: 404s), plus, for the runs operations, the real
    session and run so their handlers run past the ownership checks."""
    found = [operation.as_strategy(generation_mode=mode)]
    if mode is GenerationMode.POSITIVE and operation.path.startswith(RUN_PATHS):
        fixed = {k: v for k, v in ids.items() if "{" + k + "}" in operation.path}
        if fixed:
            found.append(operation.as_strategy(generation_mode=mode, path_parameters=fixed))
    return found


def fuzz(
    operation: Any, strategy: Any, headers: dict[str, str], seen: set[tuple[str, int]]
) -> str | None:
    """The first 5xx of an operation's cases, or ``None``; ``seen`` collects (operation,
    status) pairs."""

    @FUZZ
    @given(case=strategy)
    def run(case: Any) -> None:
        try:
            response = case.call(headers=headers, timeout=10)
        except Exception as exc:  # in process, a 500's exception reaches the caller
            seen.add((operation.label, 500))
            raise AssertionError(f"raised {exc!r}\n  {case.as_curl_command(headers)}") from exc
        seen.add((operation.label, response.status_code))
        assert response.status_code < 500, (
            f"{response.status_code} {response.text[:300]}\n  {case.as_curl_command(headers)}"
        )

    try:
        run()
    except AssertionError as exc:
        return f"{operation.label}: {exc}".split("\nFalsifying")[0]
    except Unsatisfiable:  # nothing to make invalid: an operation without parameters or body
        return None
    return None


def test_no_operation_answers_5xx(fuzzed_app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed_app)
    user = login(schema)
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"invalid operation in the schema: {result.err()}"
        operations.append(result.ok())
    assert len(operations) >= 10
    seen: set[tuple[str, int]] = set()
    failures = [
        failure
        for operation in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        for strategy in strategies(operation, mode, user.ids)
        if (failure := fuzz(operation, strategy, user.headers, seen)) is not None
    ]
    # every operation ran, and the token let the calls in (not just 401s)
    assert {label for label, _ in seen} == {operation.label for operation in operations}
    assert ("GET /api/v1/teams", 200) in seen and ("GET /health", 200) in seen
    unknown = [failure for failure in failures if known(failure) is None]
    assert not unknown, "server errors:\n" + "\n".join(unknown)
    if failures:
        pytest.xfail(
            "known server errors: " + "; ".join(sorted({known(f) or "" for f in failures}))
        )


def known(failure: str) -> str | None:
    """The reason of a known 5xx, or ``None``."""
    label = failure.split(":", 1)[0]
    pattern, reason = KNOWN_5XX.get(label, ("$^", ""))
    return f"{label}: {reason}" if re.search(pattern, failure) else None
