"""The plan cache on the planning eval: hit rate, accuracy of reused plans against fresh ones,
planner calls and tokens saved, time to the first step.

Run: ``.venv/bin/python benchmarks/plan_cache.py`` (about a minute; ``--planner-latency S`` to
give the planner model a latency of its own, ``--limit N`` for the last N requests only,
``--threshold T`` for another similarity threshold). A
benchmark, not a test: it prints figures.

The workload is ``evals/planning.yaml``, each request run for its team of
``evals/teams.yaml`` (a workflow team of those members) through the real runner, on a fresh
SQLite file, twice over:

* **first pass** — every request once, in the file's order: a request reuses a plan only when
  an earlier, different request of its team was similar enough;
* **second pass** — every request again, as users ask again: a comparison with other things
  ("Compare Redis and Memcached" → "Compare Cassandra and Neo4j"), any other request as
  written.

The planner is a stand-in model that answers what the offline rules plan (the planner the eval
measures) as a model's JSON reply, with confidence 0.9 — so a fresh plan is the eval's plan and
the cache is measured on the plans a model would make. Its tokens are estimated (4 characters a
token: the planner's system prompt, the request, the reply). Every plan — fresh or reused — is
judged by the eval's own ``judge`` against the request it ran for. The same workload with
``plan_cache: false`` is the baseline: plans, planner calls and time to first step without the
cache. Workers answer "ok" at once: the time to the first step is the planning path's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata

from teamgraph.brief import current_brief
from teamgraph.config import Settings
from teamgraph.plan import PlanDecision
from teamgraph.planning.routing import WorkerInfo
from teamgraph.planning.rules import plan_by_rules
from teamgraph.planning.templates import available
from teamgraph.runtime.team_api import Team
from teamgraph.testing import FunctionChatModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "evals"))
from planning import Case, Report, judge, load  # noqa: E402  (the eval's own judge)

OTHERS = ["Cassandra", "Neo4j", "ClickHouse", "DynamoDB", "SQLite", "Elasticsearch"]
CHARS_PER_TOKEN = 4


@dataclass
class Planner:
    """The stand-in planner model: the offline rules' plan as a model's JSON reply."""

    teams: dict[str, list[WorkerInfo]]
    latency: float = 0.0
    calls: int = 0
    tokens: int = 0
    templates: dict[str, Any] = field(default_factory=available)

    def model(self, team: str) -> FunctionChatModel:
        members = self.teams[team]
        return FunctionChatModel(fn=lambda m: self.reply(m, members))

    def reply(self, messages: list[BaseMessage], members: list[WorkerInfo]) -> Any:
        brief = current_brief()
        if brief is None or brief.role != "planner":
            return "ok"
        request = str([m for m in messages if isinstance(m, HumanMessage)][-1].content)
        ruled = plan_by_rules(request, members, members[0].name, self.templates)
        text = json.dumps(ruled.plan.to_dict() | {"confidence": 0.9})
        prompt = sum(len(str(m.content)) for m in messages) // CHARS_PER_TOKEN
        output = len(text) // CHARS_PER_TOKEN
        self.calls += 1
        self.tokens += prompt + output
        usage = UsageMetadata(
            input_tokens=prompt, output_tokens=output, total_tokens=prompt + output
        )
        return self.answer(AIMessage(text, usage_metadata=usage))

    async def answer(self, reply: AIMessage) -> AIMessage:
        """The reply after the planner's latency (the workers answer at once)."""
        await asyncio.sleep(self.latency)
        return reply


@dataclass
class Ran:
    case: Case
    decision: PlanDecision
    first_step_s: float


async def run_pass(
    cases: list[Case], teams: dict[str, list[WorkerInfo]], settings: Settings, planner: Planner
) -> list[Ran]:
    by_team: dict[str, list[tuple[int, Case]]] = {}
    for i, case in enumerate(cases):
        by_team.setdefault(case.team, []).append((i, case))
    out: dict[int, Ran] = {}
    for name, numbered in by_team.items():
        members = [{"name": w.name, "description": w.description} for w in teams[name]]
        spec = {"name": f"eval_{name}", "members": members, "pattern": "workflow"}
        team = Team.from_dict(spec, settings=settings, model=planner.model(name))
        async with team.runner() as runner:
            for i, case in numbered:
                out[i] = await one_run(runner, case, f"{name}-{i}-{time.monotonic_ns()}")
    return [out[i] for i in range(len(cases))]


async def one_run(runner: Any, case: Case, run_id: str) -> Ran:
    started = time.perf_counter()
    first_step = 0.0
    async for event in runner.stream(case.request, run_id=run_id):
        if event.type == "step_started" and not first_step:
            first_step = time.perf_counter() - started
    result = await runner.result(run_id)
    decision = PlanDecision(result.plan, result.planner_tier or "explicit")
    return Ran(case, decision, first_step)


def asked_again(case: Case) -> Case:
    """The request as a user asks it again: a comparison of other things, else as written."""
    if not case.entities:
        return case
    request, entities = case.request, []
    for old, new in zip(case.entities, OTHERS, strict=False):
        request = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, request)
        entities.append(new)
    return replace(case, request=request, entities=entities)


def accuracy(rans: list[Ran]) -> Report:
    report = Report(requests=len(rans))
    for ran in rans:
        judge(ran.case, ran.decision, report)
    return report


def rates(report: Report) -> str:
    measures = ("single vs multi", "routing", "entities/aspects")
    parts = []
    for m in measures:
        t = report.measures[m]
        parts.append(f"{m} {t.hits}/{t.total} ({t.rate:.1%})" if t.total else f"{m} -")
    return "; ".join(parts)


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values) * 1000:.1f} ms (n={len(values)})"


async def main_async(latency: float, limit: int | None, show: bool, threshold: float) -> None:
    teams, cases = load()
    cases = cases[::-1][:limit][::-1] if limit else cases  # the last ones: comparisons too
    again = [asked_again(c) for c in cases]
    results: dict[str, dict[str, list[Ran]]] = {}
    planners: dict[str, Planner] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, on in (("no cache", False), ("cache", True)):
            settings = Settings(
                database_url=f"sqlite:///{tmp}/{mode.replace(' ', '_')}.db",
                plan_cache=on,
                plan_cache_threshold=threshold,
                user_id="bench",
            )
            planner = Planner(teams, latency)
            planners[mode] = planner
            t0 = time.perf_counter()
            first = await run_pass(cases, teams, settings, planner)
            second = await run_pass(again, teams, settings, planner)
            results[mode] = {"first": first, "second": second}
            print(f"{mode}: {2 * len(cases)} runs in {time.perf_counter() - t0:.1f} s")
    report(results, planners, len(cases), show)


def report(
    results: dict[str, dict[str, list[Ran]]], planners: dict[str, Planner], n: int, show: bool
) -> None:
    fresh, cached = results["no cache"], results["cache"]
    for name in ("first", "second"):
        tiers = Counter(r.decision.tier for r in cached[name])
        hits = [i for i, r in enumerate(cached[name]) if r.decision.tier == "cache"]
        print(f"\n{name} pass: {len(hits)}/{n} reused ({len(hits) / n:.1%}); tiers {dict(tiers)}")
        print(f"  all plans, no cache:   {rates(accuracy(fresh[name]))}")
        print(f"  all plans, with cache: {rates(accuracy(cached[name]))}")
        print(f"  the reused plans:      {rates(accuracy([cached[name][i] for i in hits]))}")
        print(f"  same requests, fresh:  {rates(accuracy([fresh[name][i] for i in hits]))}")
        same = sum(
            cached[name][i].decision.plan.to_dict()["steps"]
            == fresh[name][i].decision.plan.to_dict()["steps"]
            for i in hits
        )
        print(f"  reused plan identical to the fresh plan (steps): {same}/{len(hits)}")
        if show:
            show_differences(name, cached[name], fresh[name])
        hit_times = [cached[name][i].first_step_s for i in hits]
        miss_times = [r.first_step_s for i, r in enumerate(cached[name]) if i not in hits]
        base_times = [fresh[name][i].first_step_s for i in hits]
        print(f"  time to first step, reused plan:        {ms(hit_times)}")
        print(f"  time to first step, same runs no cache: {ms(base_times)}")
        print(f"  time to first step, cache missed:       {ms(miss_times)}")
        print(
            f"  time to first step, no cache (all):     {ms([r.first_step_s for r in fresh[name]])}"
        )
    off, on = planners["no cache"], planners["cache"]
    print(
        f"\nplanner model calls: {off.calls} without the cache, {on.calls} with it "
        f"({off.calls - on.calls} saved, {(off.calls - on.calls) / off.calls:.1%}); "
        f"tokens (estimated): {off.tokens} → {on.tokens} ({off.tokens - on.tokens} saved)"
    )


def show_differences(name: str, cached: list[Ran], fresh: list[Ran]) -> None:
    for ran, baseline in zip(cached, fresh, strict=True):
        steps = ran.decision.plan.to_dict()["steps"]
        fresh_steps = baseline.decision.plan.to_dict()["steps"]
        if ran.decision.tier == "cache" and steps != fresh_steps:
            print(f"    differs: {ran.case.request!r}")
            print(f"      reused {steps}\n      fresh  {fresh_steps}")
        elif ran.decision.tier != "cache" and name == "second":
            print(f"    missed: {ran.case.request!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planner-latency", type=float, default=0.0, help="seconds per call")
    parser.add_argument("--limit", type=int, default=None, help="only the last N requests")
    parser.add_argument("--threshold", type=float, default=Settings().plan_cache_threshold)
    parser.add_argument("--show", action="store_true", help="list reused plans that differ")
    args = parser.parse_args()
    asyncio.run(main_async(args.planner_latency, args.limit, args.show, args.threshold))


if __name__ == "__main__":
    main()
