"""Database faults survived in place, by a deployment's processes (one API process, two workers,
each its own OS process) talking to PostgreSQL through a proxy that breaks their connections
(:class:`tests.faultproxy.ProxyThread`): every connection reset with new ones refused for 2 s
(a restart), then a 3 s stall (nothing passes, connections stay open).

Every run in flight completes, none re-runs a finished step, each one's usage equals a run of
the same request that met no fault; no process is restarted; requests during the outage get 503
with ``Retry-After`` — never 500 — and ``/ready`` says not-ready, then recovers by itself.
``benchmarks/faults.py`` runs the long version (≥ 100 faults, 2 API + 2 worker processes)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from .cluster import PASSWORD, SLOW, Client, Cluster, drop_database, make_database
from .faultproxy import ProxyThread
from .helpers import PROCESS_CEILING_S

pytestmark = pytest.mark.timeout(900)
RUNS = 4


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyThread]:
    made = ProxyThread(("127.0.0.1", 5432))
    yield made
    made.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, proxy: ProxyThread) -> Iterator[Cluster]:
    url = make_database()
    folder = tmp_path_factory.mktemp("outages")
    (folder / "teams").mkdir()
    (folder / "teams" / "slow.yaml").write_text(SLOW)
    made = Cluster(proxy.url(url.rsplit("/", 1)[1]), folder / "teams", folder)
    api = made.start_api()
    made.start_worker()
    made.start_worker()
    try:
        made.wait_ready()
        yield made
    finally:
        made.stop()
        api.terminate()
        api.wait(timeout=30)
        drop_database(url)


@pytest.fixture
async def users(cluster: Cluster) -> AsyncIterator[list[Client]]:
    async with httpx.AsyncClient(timeout=120) as http:
        made, api = [], cluster.apis[0]
        for _ in range(RUNS + 1):
            email = f"u{uuid.uuid4().hex[:8]}@example.com"
            body = {"email": email, "password": PASSWORD}
            assert (
                await http.post(f"{cluster.apis[0]}/api/v1/auth/register", json=body)
            ).is_success
            form = {"username": email, "password": PASSWORD}
            login = await http.post(f"{api}/api/v1/auth/login", data=form)
            http.cookies.clear()
            made.append(Client(http, login.json()["access_token"]))
        yield made


async def _follow(user: Client, api: str, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run, reconnecting after the last one seen if the stream breaks."""
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] not in ("run_completed", "run_failed", "run_cancelled"):
        try:
            async for event in user.events(api, run_id, seen[-1]["seq"] if seen else 0):
                seen.append(event)
        except (httpx.HTTPError, AssertionError):  # 503 or a cut stream during the outage
            await asyncio.sleep(0.5)
    return seen


async def _bounded(cluster: Cluster, follows: Any, run_ids: list[str]) -> Any:
    """``follows`` awaited for at most :data:`PROCESS_CEILING_S`; past it, the test fails with
    the runs' rows, their queue jobs and the processes' last log lines."""
    try:
        return await asyncio.wait_for(follows, PROCESS_CEILING_S)
    except TimeoutError:
        pytest.fail(f"the runs never ended:\n{cluster.report(run_ids)}")


async def _outage_answers(user: Client, api: str, run_id: str) -> list[int]:
    """Statuses of a run read and of /ready, asked while the database is cut off."""
    statuses = []
    for _ in range(6):
        for url in (f"{api}/api/v1/runs/{run_id}", f"{api}/ready"):
            statuses.append((await user.http.get(url, headers=user.headers)).status_code)
        await asyncio.sleep(0.25)
    return statuses


def _usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(events[-1]["usage"])


async def test_runs_in_flight_survive_a_restart_and_a_stall_of_the_database(
    cluster: Cluster, proxy: ProxyThread, users: list[Client]
) -> None:
    api = cluster.apis[0]
    first = await users[0].start(api)
    reference = await _bounded(cluster, _follow(users[0], api, first), [first])  # no fault
    assert reference[-1]["type"] == "run_completed"
    runs = [await user.start(api) for user in users[1:]]
    follows = [
        asyncio.create_task(_follow(user, api, run_id))
        for user, run_id in zip(users[1:], runs, strict=True)
    ]
    await asyncio.sleep(1.0)  # the runs are under way
    assert proxy.reset() > 0  # a restart: every connection cut, new ones refused for 2 s
    proxy.refuse(2.0)
    during = await _outage_answers(users[1], api, runs[0])
    assert 500 not in during and 503 in during, during
    await asyncio.sleep(1.0)
    proxy.stall(3.0)  # then nothing passes for 3 s
    results = await _bounded(cluster, asyncio.gather(*follows), runs)
    for events in results:
        assert events[-1]["type"] == "run_completed", events[-1]
        finished = Counter(e["step_id"] for e in events if e["type"] == "step_completed")
        assert set(finished.values()) == {1}  # no finished step ran again
        assert _usage(events) == _usage(reference)  # no model call made twice
    for user, run_id in zip(users[1:], runs, strict=True):
        assert await user.status(api, run_id) == "completed"
    assert all(p.poll() is None for p in cluster.workers.values())  # no process restarted
    until = time.monotonic() + PROCESS_CEILING_S
    while (await users[0].http.get(f"{api}/ready")).status_code != 200:
        assert time.monotonic() < until, "/ready never recovered"
        await asyncio.sleep(0.2)
    ports = cluster.health.values()
    for port in ports:  # the workers say ready again by themselves
        assert (await users[0].http.get(f"http://127.0.0.1:{port}/ready")).status_code == 200
    after = await users[0].start(api)  # and new runs work
    ended = await _bounded(cluster, _follow(users[0], api, after), [after])
    assert ended[-1]["type"] == "run_completed"
