"""Real-provider wiring benchmark, on the fake OpenAI-compatible provider of the tests (real HTTP,
real ``openai`` client, a streamed reply paced like a real model's):

* **token latency** — for every streamed token, the time from the provider writing it to an SSE
  client of ``teamgraph serve`` (a subprocess) reading its ``token`` event: median and p99. The
  baseline, measured in the same run: the same stream read by LangChain's ``ChatOpenAI.astream``
  in this process (provider → client, no teamgraph); the ratio is how much later the SSE client
  sees a token than a bare client would;
* **limiter** — an 80-step plan fanned out 20 at a time against ``requests_per_minute: 600``
  (10/s, a burst of 10): the rate the provider sees beyond the burst, against the configured
  one, the worst window's excess over the rate (the bucket's bound is its burst), and the same
  fan-out with no limit (the baseline: what the limiter holds back);
* **token limiter** — after a reply that reported 10,000 tokens against ``tokens_per_minute:
  60000`` (a 10 s bucket), how long a ~500-token call waits: the bucket must leak 501 tokens at
  1,000 a second, so the wait should be ≈ 0.5 s, not the bucket's 10 s (the suite's test checks
  only that it waits; how long is measured here).

Run ``python benchmarks/providers.py`` (about 30 s) or ``--quick``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the fake provider lives with the tests

from tests.fake_providers import FakeProvider, Say  # noqa: E402

from server import Api, Server, percentile, server_settings  # noqa: E402
from teamgraph.config import ProviderSettings, Settings  # noqa: E402
from teamgraph.llm.provider_limits import ProviderLimits  # noqa: E402
from teamgraph.plan import Plan, Step  # noqa: E402
from teamgraph.runtime.team_api import Team  # noqa: E402

MODEL = "openai:gpt-4o-mini"
PIECE_DELAY_S = 0.01  # ≈ 100 tokens/s, a fast hosted model
ANSWER = " ".join(f"word{i}" for i in range(60))  # 60 tokens per reply
TEAM_YAML = f"""\
name: bench
description: One writer on a real (fake) provider.
pattern: single
model: {MODEL}
members:
  - name: writer
    description: writes
"""


async def token_latency(fake: FakeProvider, runs: int) -> list[float]:
    """Provider-write → SSE-read delay of every token of ``runs`` runs through the server."""
    root = Path(tempfile.mkdtemp(prefix="tg-providers-"))
    teams = root / "teams"
    teams.mkdir()
    (teams / "bench.yaml").write_text(TEAM_YAML)
    settings = server_settings(root, teams, None).model_copy(
        update={"providers": Settings(providers={"openai": _entry(fake)}).providers}
    )
    server = Server(settings, root)
    delays: list[float] = []
    try:
        await server.wait_ready()
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            api = await Api.login(http)
            for _ in range(runs):
                session = await api.session()  # one each: a session runs one run at a time
                fake.script(Say(ANSWER))
                served_before = len(fake.served)
                received = await _tokens_of_one_run(api, session)
                sent = fake.served[served_before].sent_at[1:]  # chunk 0 holds only the role
                delays += [r - s for r, s in zip(received, sent, strict=False)]
    finally:
        server.stop()
    return delays


async def _tokens_of_one_run(api: Api, session: str) -> list[float]:
    run_id = await api.start(session)
    received: list[float] = []
    headers = {**api.headers, "Accept": "text/event-stream"}
    url = f"/api/v1/runs/{run_id}/events"
    async with api.http.stream("GET", url, headers=headers) as response:
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
                if event == "token":
                    received.append(time.monotonic())
                elif event in ("run_completed", "run_failed"):
                    break
    return received


async def bare_client_latency(fake: FakeProvider, runs: int) -> list[float]:
    """The baseline: the same streams read by ``ChatOpenAI.astream`` directly."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=fake.url("openai"), api_key="sk-bench", max_retries=0
    )
    delays: list[float] = []
    for _ in range(runs):
        fake.script(Say(ANSWER))
        before = len(fake.served)
        received = [time.monotonic() async for chunk in model.astream("hi") if chunk.text]
        sent = fake.served[before].sent_at[1:]
        delays += [r - s for r, s in zip(received, sent, strict=False)]
    return delays


def _entry(fake: FakeProvider, **limits: int) -> dict[str, object]:
    return {"base_url": fake.url("openai"), "api_key": "sk-bench", **limits}


async def fan_out(fake: FakeProvider, steps: int, **limits: int) -> list[float]:
    """Arrival times at the provider of a ``steps``-step plan run 20 steps at a time."""
    root = Path(tempfile.mkdtemp(prefix="tg-limits-"))
    settings = Settings(
        database_url=f"sqlite:///{root}/limits.db", providers={"openai": _entry(fake, **limits)}
    )
    members = [{"name": "w", "description": "works"}]
    team = Team.from_dict(
        {
            "name": "fan",
            "model": MODEL,
            "members": members,
            "workflow": {"max_parallel": 20, "max_steps": steps},
        },
        settings=settings,
    )
    plan = Plan(steps=[Step(id=f"s{i}", worker="w", task=f"task {i}") for i in range(steps)])
    before = len(fake.served)
    result = await team.run("fan out", plan=plan, run_id=uuid.uuid4().hex)
    if result.status != "completed":
        raise SystemExit(f"the fan-out run ended {result.status}: {result.error}")
    return sorted(s.at for s in fake.served[before:])


async def token_wait() -> float:
    """Seconds a ~500-token call waits after a reply that reported 10,000 tokens."""
    gate = ProviderLimits(ProviderSettings(tokens_per_minute=60_000))

    async def big() -> AIMessage:
        usage = UsageMetadata(input_tokens=9_000, output_tokens=1_000, total_tokens=10_000)
        return AIMessage("long answer", usage_metadata=usage)

    await gate.through(big, [HumanMessage("hi")])
    start = time.monotonic()
    await gate.through(big, [HumanMessage("x" * 2_000)])
    return time.monotonic() - start


def sustained_rate(arrivals: Sequence[float], burst: int) -> float:
    """Requests per second beyond the ``burst`` the bucket lets through at once: a limiter
    holding ``rate`` keeps ``n - burst <= rate * span`` over the whole run."""
    span = arrivals[-1] - arrivals[0]
    return (len(arrivals) - burst) / span if span > 0 else float("inf")


def worst_excess(arrivals: Sequence[float], per_s: float) -> float:
    """The most requests any window let through beyond ``per_s`` times its length (a limiter
    holding the rate keeps this at or under its burst)."""
    return max(
        (j - i + 1) - per_s * (arrivals[j] - arrivals[i])
        for i in range(len(arrivals))
        for j in range(i, len(arrivals))
    )


async def benchmark(args: argparse.Namespace) -> None:
    runs = 3 if args.quick else 20
    with FakeProvider(piece_delay_s=PIECE_DELAY_S) as fake:
        bare = await bare_client_latency(fake, runs)
        sse = await token_latency(fake, runs)
        print(f"token latency, provider → client ({len(sse)} tokens, {runs} runs)")
        for name, values in (("bare ChatOpenAI.astream", bare), ("teamgraph SSE", sse)):
            print(
                f"  {name:<24} p50 {statistics.median(values) * 1000:6.2f} ms"
                f"   p99 {percentile(values, 99) * 1000:6.2f} ms"
            )
        added = statistics.median(sse) - statistics.median(bare)
        print(
            f"  teamgraph adds {added * 1000:.2f} ms at p50 "
            f"(ratio p50 {statistics.median(sse) / statistics.median(bare):.1f}×)"
        )
        steps, rpm = (30, 600) if args.quick else (80, 600)
        free = await fan_out(fake, steps)
        held = await fan_out(fake, steps, requests_per_minute=rpm)
    per_s, burst = rpm / 60, int(rpm / 60)
    print(f"limiter, {steps} steps fanned out 20 at a time, requests_per_minute={rpm}")
    print(f"  no limit        {len(free) / (free[-1] - free[0]):7.1f} requests/s over the run")
    rate = sustained_rate(held, burst)
    print(
        f"  limited         {rate:7.1f} requests/s beyond the burst of {burst} "
        f"(configured {per_s:.0f}/s: ratio {rate / per_s:.2f}); worst window "
        f"{worst_excess(held, per_s):.1f} requests over the rate (bound: {burst})"
    )
    waited = await token_wait()
    print(
        f"token limiter, a 500-token call after a 10,000-token reply (60,000 tokens/minute): "
        f"waited {waited:.2f} s (needed 0.50 s: ratio {waited / 0.501:.2f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (a few seconds)")
    asyncio.run(benchmark(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
