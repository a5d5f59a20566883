"""The standing hostile-input fuzz (issue 31): schemathesis over every operation of the
OpenAPI schema, as one user who has a finished run and a paused run, with a second user's
session and run beside them. Whatever the generated request — valid or not, on the caller's own
ids, on the other user's, on random ones — no answer is a 5xx, and the other user's ids are
never a 2xx.

Deterministic (``derandomize``) and short (:data:`EXAMPLES` per operation and id set): the
whole test runs in about a minute. :mod:`tests.api.test_schema` fuzzes more examples of each
operation with a session token; this one is the two-user matrix."""

from __future__ import annotations

import time
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

from ..helpers import CEILING_S
from .conftest import PASSWORD

EXAMPLES = 4
GENEROUS = {group: "100000/second" for group in ("chat", "stream", "register", "login")}
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def fuzzed_app(api_settings: Settings) -> Iterator[FastAPI]:
    yield create_app(api_settings.model_copy(update={"rate_limits": GENEROUS}))
    asgi.shutdown_lifespans()  # schemathesis started the lifespan on first use


@dataclass
class Tenant:
    headers: dict[str, str]  # the user's own token
    ids: list[dict[str, str]]  # path ids of their things: a paused run's, a finished run's


def _call(
    schema: Any, path: str, method: str, headers: dict[str, str] | None = None, **kw: Any
) -> Any:
    case = schema[path][method].Case(**kw)
    return case.call(headers=headers or {}, timeout=60)


def tenant(schema: Any, email: str) -> Tenant:
    """A user with a finished run (team research) and a paused one (team notebook, which asks
    a question)."""
    body = {"email": email, "password": PASSWORD}
    assert (
        _call(
            schema, "/api/v1/auth/register", "POST", body=body, media_type="application/json"
        ).status_code
        == 201
    )
    form = {"username": email, "password": PASSWORD}
    token = _call(
        schema,
        "/api/v1/auth/login",
        "POST",
        body=form,
        media_type="application/x-www-form-urlencoded",
    ).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    ids = []
    for team, text, until in (
        ("research", "Compare PostgreSQL and MongoDB", {"completed"}),
        ("notebook", "help", {"interrupted"}),
    ):
        made = _call(
            schema,
            "/api/v1/auth/session",
            "POST",
            headers,
            body={"team": team},
            media_type="application/json",
        )
        session_id = made.json()["session_id"]
        started = _call(
            schema,
            "/api/v1/sessions/{session_id}/runs",
            "POST",
            headers,
            path_parameters={"session_id": session_id},
            body={"input": text},
            media_type="application/json",
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        _until(schema, headers, run_id, until)
        ids.append({"session_id": session_id, "thread_id": session_id, "run_id": run_id})
    return Tenant(headers, ids)


def _until(schema: Any, headers: dict[str, str], run_id: str, statuses: set[str]) -> None:
    """Wait until the run stands in one of ``statuses`` (a ceiling against hangs only)."""
    deadline = time.monotonic() + CEILING_S
    while True:
        status = _call(
            schema, "/api/v1/runs/{run_id}", "GET", headers, path_parameters={"run_id": run_id}
        ).json()["status"]
        if status in statuses:
            return
        assert time.monotonic() < deadline, f"run {run_id} is still {status}"
        time.sleep(0.05)


def fixed_ids(operation: Any, ids: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in ids.items() if "{" + k + "}" in operation.path}


def _id_sets(operation: Any, own: Tenant, other: Tenant) -> list[tuple[dict[str, str], bool]]:
    """The path ids to fuzz an operation with, and whether they are the other user's: random
    ones (``{}``), then — when its path names a session, thread or run — the caller's paused
    and finished runs' and the other user's."""
    mine = [fixed_ids(operation, ids) for ids in own.ids]
    if not any(mine):
        return [({}, False)]
    return [
        ({}, False),
        *((ids, False) for ids in mine),
        (fixed_ids(operation, other.ids[0]), True),
    ]


def fuzz(operation: Any, strategy: Any, headers: dict[str, str], foreign: bool) -> str | None:
    """The first 5xx of an operation's cases — or, on another user's ids, the first 2xx."""

    @FUZZ
    @given(case=strategy)
    def run(case: Any) -> None:
        try:
            response = case.call(headers=headers, timeout=30)
        except Exception as exc:  # in process, a 500's exception reaches the caller
            raise AssertionError(f"raised {exc!r}\n  {case.as_curl_command(headers)}") from exc
        assert response.status_code < 500, (
            f"{response.status_code} {response.text[:300]}\n  {case.as_curl_command(headers)}"
        )
        if foreign:
            assert response.status_code >= 300, (
                f"another user's ids answered {response.status_code} {response.text[:300]}"
                f"\n  {case.as_curl_command(headers)}"
            )

    try:
        run()
    except AssertionError as exc:
        return f"{operation.label}: {exc}".split("\nFalsifying")[0]
    except Unsatisfiable:  # nothing to make invalid: an operation without parameters or body
        return None
    return None


def test_two_users_a_paused_and_a_finished_run_and_no_5xx(fuzzed_app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed_app)
    alice, bob = tenant(schema, "alice@example.com"), tenant(schema, "bob@example.com")
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    assert len(operations) >= 40
    failures = []
    for operation in operations:
        for path_ids, foreign in _id_sets(operation, alice, bob):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                extra = {"path_parameters": path_ids} if path_ids else {}
                strategy = operation.as_strategy(generation_mode=mode, **extra)
                if (failure := fuzz(operation, strategy, alice.headers, foreign)) is not None:
                    failures.append(failure)
    assert not failures, "\n".join(failures)
