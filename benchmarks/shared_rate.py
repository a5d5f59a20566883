"""A provider's request rate, shared by every worker: 1 API process and N ``teamgraph worker``
processes on one PostgreSQL database, the team's model an OpenAI-compatible fake provider on
127.0.0.1 configured at ``requests_per_minute: 30`` (``TEAMGRAPH_PROVIDERS``), far more runs
queued at once than that rate allows.

    .venv/bin/python benchmarks/shared_rate.py [--workers 2] [--seconds 120] [--rpm 30]

Printed: the requests the provider received, their rate over the window (from the first to the
last request), the most in any 60-second window, and the ratio to the configured rate — with
per-process limits (before) N workers made N × the rate. Target (issue 30): ≤ the configured
rate plus its burst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster import PASSWORD, Client, Cluster, drop_database, make_database  # noqa: E402
from tests.fake_providers import FakeProvider  # noqa: E402

TEAM = """\
name: rated
description: One agent on a rate-limited provider.
pattern: single
model: openai:gpt-4o-mini
members: [writer]
"""


async def _flood(cluster: Cluster, runs: int) -> None:
    """Start ``runs`` runs at once (each in its own session) and leave them to the workers."""
    api = cluster.apis[0]
    async with httpx.AsyncClient(timeout=60) as http:
        email = f"u{uuid.uuid4().hex[:8]}@example.com"
        body = {"email": email, "password": PASSWORD}
        await http.post(f"{api}/api/v1/auth/register", json=body)
        form = {"username": email, "password": PASSWORD}
        login = await http.post(f"{api}/api/v1/auth/login", data=form)
        http.cookies.clear()
        user = Client(http, login.json()["access_token"])
        for n in range(runs):
            await user.start(api, team="rated", text=f"Write a note about item {n}")


def _most_in_a_minute(moments: list[float]) -> int:
    ordered, most, start = sorted(moments), 0, 0
    for end, moment in enumerate(ordered):
        while moment - ordered[start] >= 60.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rpm", type=int, default=30)
    args = parser.parse_args()
    url = make_database()
    folder = Path(tempfile.mkdtemp(prefix="tg-rate-"))
    (folder / "teams").mkdir()
    (folder / "teams" / "rated.yaml").write_text(TEAM)
    with FakeProvider() as provider:
        cluster = Cluster(url, folder / "teams", folder)
        cluster.extra = {
            "OPENAI_API_KEY": "sk-fake",
            "TEAMGRAPH_PROVIDERS": json.dumps(
                {
                    "openai": {
                        "base_url": provider.url("openai"),
                        "requests_per_minute": args.rpm,
                        "streaming": False,
                    }
                }
            ),
            "TEAMGRAPH_RATE_LIMITS": json.dumps({"chat": "100000/minute"}),
            "TEAMGRAPH_OTEL_EXPORTER": "",
        }
        api = cluster.start_api()
        for _ in range(args.workers):
            cluster.start_worker()
        try:
            cluster.wait_ready()
            runs = int(args.rpm * args.seconds / 60 * 3)  # three times what the rate allows
            asyncio.run(_flood(cluster, runs))
            time.sleep(args.seconds)
            moments = [served.at for served in provider.served]
        finally:
            cluster.stop()
            api.terminate()
            api.wait(timeout=60)
            drop_database(url)
    span = max(moments) - min(moments) if len(moments) > 1 else float("nan")
    rate = (len(moments) - 1) / span * 60 if len(moments) > 1 else float("nan")
    most = _most_in_a_minute(moments)
    print(
        f"{args.workers} workers, requests_per_minute {args.rpm}, {len(moments)} requests "
        f"in {span:.0f} s"
    )
    print(
        f"  rate at the provider {rate:.1f}/min (ratio to configured {rate / args.rpm:.2f}); "
        f"most in any 60 s: {most}"
    )
    print(f"  per-process limits would allow {args.workers * args.rpm}/min")


if __name__ == "__main__":
    main()
