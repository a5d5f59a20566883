"""Scheduling benchmark: teamgraph's eager workflow scheduler vs a round-barrier LangGraph baseline.

Both schedulers run the same seeded random DAGs of fake steps (each step just sleeps its latency)
in the same process. For every DAG we report ``makespan / critical path``: 1.0 is the ideal (the
run took exactly as long as its longest latency-weighted dependency chain), anything above is time
lost to scheduling (waiting at barriers) or to framework overhead.

* ``teamgraph``: the real :class:`teamgraph.runtime.runner.Runner` with SQLite checkpointing, an
  explicit plan and a ``FunctionChatModel`` that sleeps the step's latency.
* ``rounds``: the "seed-style" design teamgraph replaces, written directly on LangGraph: a
  ``dispatch`` node fans every ready step out with ``Send``, ``run_step`` sleeps, and
  ``check_completion`` (a superstep barrier) loops back to ``dispatch`` until every step is done.

Then the per-step overhead: zero-latency DAGs of 20 and 100 steps, makespan / steps in ms.

Run ``python benchmarks/scheduling.py`` (full, ~2-3 min) or ``--quick`` (smoke run, < 20 s).
``--profile`` runs one zero-latency 100-step teamgraph DAG under cProfile instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import math
import operator
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from teamgraph.config import Settings
from teamgraph.plan import Plan, Step
from teamgraph.runtime.backend import Backend, open_backend
from teamgraph.runtime.run_config import RunConfig
from teamgraph.runtime.runner import Runner
from teamgraph.specs.loader import team_from_dict
from teamgraph.specs.team import TeamSpec
from teamgraph.testing import FunctionChatModel

RATIO_TARGET = 1.02
OVERHEAD_TARGET_MS = 1.0
SCHEDULERS = ("teamgraph", "rounds")
ROUNDS_CHECKPOINTER = "InMemorySaver"


# --------------------------------------------------------------------------------------------
# DAGs


@dataclass(frozen=True)
class Dag:
    """Steps ``s0..s{n-1}``; ``deps[i]`` are indices of earlier steps, ``latency[i]`` seconds."""

    name: str
    latency: tuple[float, ...]
    deps: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        return len(self.latency)

    def ids(self) -> list[str]:
        return [step_id(i) for i in range(self.size)]

    def dep_ids(self, i: int) -> list[str]:
        return [step_id(d) for d in self.deps[i]]

    def latency_by_id(self, scale: float = 1.0) -> dict[str, float]:
        return {step_id(i): lat * scale for i, lat in enumerate(self.latency)}


def step_id(i: int) -> str:
    return f"s{i}"


def dag20(seed: int) -> Dag:
    """20 steps, 0-2 dependencies on earlier steps, latency uniform 50-500 ms."""
    rng = random.Random(seed)
    latency, deps = [], []
    for i in range(20):
        deps.append(tuple(sorted(rng.sample(range(i), rng.randint(0, min(2, i))))))
        latency.append(rng.uniform(0.05, 0.5))
    return Dag(f"dag20-{seed}", tuple(latency), tuple(deps))


def dag100(seed: int) -> Dag:
    """100 steps, 0-3 dependencies on earlier steps, latency lognormal (median 100 ms) clipped
    to [20 ms, 1 s]."""
    rng = random.Random(seed)
    latency, deps = [], []
    for i in range(100):
        deps.append(tuple(sorted(rng.sample(range(i), rng.randint(0, min(3, i))))))
        latency.append(min(max(rng.lognormvariate(math.log(0.1), 0.6), 0.02), 1.0))
    return Dag(f"dag100-{seed}", tuple(latency), tuple(deps))


def critical_path(dag: Dag) -> float:
    """Longest latency-weighted path (sum of the latencies along it). Steps are topo-ordered."""
    finish: list[float] = []
    for i, lat in enumerate(dag.latency):
        finish.append(lat + max((finish[d] for d in dag.deps[i]), default=0.0))
    return max(finish)


# --------------------------------------------------------------------------------------------
# teamgraph


def bench_team() -> TeamSpec:
    return team_from_dict(
        {
            "name": "bench",
            "members": [{"name": "w", "description": "benchmark worker"}],
            "workflow": {"max_steps": 200, "max_parallel": 256},
        }
    )


def bench_plan(dag: Dag) -> Plan:
    steps = [
        Step(id=step_id(i), worker="w", task=f"step {step_id(i)}", depends_on=dag.dep_ids(i))
        for i in range(dag.size)
    ]
    return Plan(name=dag.name, steps=steps)


def sleeping_model(latency: dict[str, float]) -> FunctionChatModel:
    """A fake model that sleeps the latency of the step named on the prompt's first line."""

    async def reply(messages: list[BaseMessage]) -> str:
        first_line = str(messages[-1].content).split("\n", 1)[0]  # "step s{i}"
        sid = first_line.removeprefix("step ").strip()
        await asyncio.sleep(latency[sid])
        return f"done {sid}"

    return FunctionChatModel(fn=reply)


class Shared:
    """One backend (one SQLite file) for every teamgraph run, as in a long-lived process."""

    backend: Backend | None = None
    settings: Settings | None = None


@asynccontextmanager
async def shared_backend() -> AsyncIterator[None]:
    with tempfile.TemporaryDirectory(prefix="tg-bench-") as tmpdir:
        Shared.settings = Settings(database_url=f"sqlite:///{tmpdir}/bench.db")
        async with open_backend(Shared.settings) as backend:
            Shared.backend = backend
            try:
                yield
            finally:
                Shared.backend = None


async def run_teamgraph(
    dag: Dag, scale: float = 1.0, profiler: cProfile.Profile | None = None
) -> float:
    """Makespan (s) of ``dag`` through the real Runner on the shared SQLite backend (a new run
    and thread each time); with ``profiler``, only ``runner.run`` is profiled."""
    assert Shared.backend is not None, "run inside shared_backend()"
    config = RunConfig(Shared.settings, model=sleeping_model(dag.latency_by_id(scale)))
    runner = Runner(bench_team(), Shared.backend, config)
    plan = bench_plan(dag)
    if profiler:
        profiler.enable()
    t0 = time.perf_counter()
    result = await runner.run("bench", plan=plan)
    makespan = time.perf_counter() - t0
    if profiler:
        profiler.disable()
    if result.status != "completed":
        raise SystemExit(f"teamgraph run of {dag.name} ended {result.status!r}: {result.error}")
    for sid in dag.ids():
        output = result.step(sid).output
        if output != f"done {sid}":
            raise SystemExit(f"teamgraph run of {dag.name}: step {sid} output {output!r}")
    return makespan


# --------------------------------------------------------------------------------------------
# rounds: the seed-style round-barrier scheduler, directly on LangGraph


def merge(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    return {**left, **right}


class RoundsState(TypedDict):
    deps: dict[str, list[str]]
    latency: dict[str, float]
    done: Annotated[dict[str, str], merge]
    rounds: Annotated[int, operator.add]


class StepTask(TypedDict):
    step_id: str
    latency: float


def dispatch(state: RoundsState) -> Command[Any]:
    """Fan out every step whose dependencies are all done (one ``Send`` per ready step)."""
    done = state["done"]
    ready = [
        sid
        for sid, deps in state["deps"].items()
        if sid not in done and all(d in done for d in deps)
    ]
    if not ready:
        raise RuntimeError("rounds: no step is ready but the DAG is not complete")
    sends = [Send("run_step", StepTask(step_id=s, latency=state["latency"][s])) for s in ready]
    return Command(update={"rounds": 1}, goto=sends)


async def run_step(task: StepTask) -> dict[str, Any]:
    await asyncio.sleep(task["latency"])
    return {"done": {task["step_id"]: f"done {task['step_id']}"}}


def check_completion(state: RoundsState) -> dict[str, Any]:
    """The round barrier: runs once every ``run_step`` of the round has finished."""
    return {}


def route(state: RoundsState) -> str:
    return END if len(state["done"]) == len(state["deps"]) else "dispatch"


def build_rounds_graph() -> Any:
    graph = StateGraph(RoundsState)
    graph.add_node("dispatch", dispatch)
    graph.add_node("run_step", run_step, input_schema=StepTask)
    graph.add_node("check_completion", check_completion)
    graph.add_edge(START, "dispatch")
    graph.add_edge("run_step", "check_completion")
    graph.add_conditional_edges("check_completion", route, ["dispatch", END])
    return graph.compile(checkpointer=InMemorySaver())


async def run_rounds(dag: Dag, scale: float = 1.0) -> float:
    """Makespan (s) of ``dag`` through the round-barrier graph."""
    graph = build_rounds_graph()
    state = {
        "deps": {step_id(i): dag.dep_ids(i) for i in range(dag.size)},
        "latency": dag.latency_by_id(scale),
        "done": {},
        "rounds": 0,
    }
    config = {"configurable": {"thread_id": dag.name}, "recursion_limit": 4 * dag.size + 10}
    t0 = time.perf_counter()
    final = await graph.ainvoke(state, config)
    makespan = time.perf_counter() - t0
    expected = {sid: f"done {sid}" for sid in dag.ids()}
    if final["done"] != expected:
        missing = sorted(set(expected) - set(final["done"]))
        raise SystemExit(f"rounds run of {dag.name} incomplete or wrong; missing {missing}")
    return makespan


RUNNERS: dict[str, Callable[[Dag, float], Awaitable[float]]] = {
    "teamgraph": run_teamgraph,
    "rounds": run_rounds,
}


# --------------------------------------------------------------------------------------------
# measurements and report


@dataclass(frozen=True)
class Config:
    label: str
    dag20_count: int
    dag100_count: int
    overhead_sizes: tuple[int, ...]
    overhead_repeats: int


FULL = Config("full", dag20_count=10, dag100_count=10, overhead_sizes=(20, 100), overhead_repeats=5)
QUICK = Config("quick", dag20_count=1, dag100_count=1, overhead_sizes=(20, 100), overhead_repeats=2)

GENERATORS: dict[str, tuple[Callable[[int], Dag], int]] = {
    "dag20": (dag20, 20_000),
    "dag100": (dag100, 100_000),
}


def suite_dags(suite: str, count: int) -> list[Dag]:
    generate, base_seed = GENERATORS[suite]
    return [generate(base_seed + k) for k in range(count)]


async def measure_suite(suite: str, dags: Sequence[Dag]) -> dict[str, list[float]]:
    """Ratio makespan / critical path of every DAG, per scheduler (interleaved per DAG)."""
    ratios: dict[str, list[float]] = {name: [] for name in SCHEDULERS}
    for dag in dags:
        cp = critical_path(dag)
        for name in SCHEDULERS:
            ratios[name].append(await RUNNERS[name](dag, 1.0) / cp)
    return ratios


async def measure_overhead(size: int, repeats: int) -> dict[str, list[float]]:
    """Per-step ms of a zero-latency DAG of ``size`` steps, per scheduler and repeat."""
    dag = suite_dags(f"dag{size}", 1)[0]
    per_step: dict[str, list[float]] = {name: [] for name in SCHEDULERS}
    for _ in range(repeats):
        for name in SCHEDULERS:
            per_step[name].append(await RUNNERS[name](dag, 0.0) / size * 1000)
    return per_step


async def warm_up() -> None:
    """One small run of each scheduler so imports and first-call caches are not measured."""
    dag = dag20(0)
    for name in SCHEDULERS:
        await RUNNERS[name](dag, 0.0)


def report_suite(suite: str, ratios: dict[str, list[float]]) -> dict[str, float]:
    medians = {}
    for name in SCHEDULERS:
        values = ratios[name]
        medians[name] = statistics.median(values)
        print(f"{suite} {name} median {medians[name]:.3f}")
        print(
            f"    detail: {suite} {name} min {min(values):.3f} max {max(values):.3f}"
            f" (n={len(values)} DAGs)"
        )
    return medians


def report_overhead(results: dict[int, dict[str, list[float]]]) -> dict[str, float]:
    """Headline per scheduler: per-step ms on the largest DAG; the detail line splits the cost
    into a fixed part per run and a marginal part per step (line through the two sizes)."""
    headline = {}
    small, large = min(results), max(results)
    for name in SCHEDULERS:
        by_size = {size: statistics.median(r[name]) for size, r in results.items()}
        headline[name] = by_size[large]
        total_small, total_large = by_size[small] * small, by_size[large] * large
        marginal = (total_large - total_small) / (large - small)
        fixed = total_small - marginal * small
        print(f"overhead {name} per_step_ms {headline[name]:.3f}")
        sizes = ", ".join(f"{size} steps {ms:.3f}" for size, ms in by_size.items())
        print(
            f"    detail: {name} per-step ms by DAG size: {sizes}; "
            f"= {fixed:.1f} ms fixed per run + {marginal:.3f} ms per step"
        )
    return headline


def report_targets(medians: dict[str, dict[str, float]], overhead: dict[str, float]) -> bool:
    ok = True
    for suite, by_name in medians.items():
        value = by_name["teamgraph"]
        passed = value <= RATIO_TARGET
        ok &= passed
        print(
            f"target {suite} teamgraph median <= {RATIO_TARGET}: "
            f"{'PASS' if passed else 'MISS'} ({value:.3f})"
        )
    passed = overhead["teamgraph"] <= OVERHEAD_TARGET_MS
    ok &= passed
    print(
        f"target overhead teamgraph per_step_ms <= {OVERHEAD_TARGET_MS}: "
        f"{'PASS' if passed else 'MISS'} ({overhead['teamgraph']:.3f})"
    )
    return ok


async def run_benchmark(config: Config) -> bool:
    print(
        f"# scheduling benchmark ({config.label}): dag20 = {config.dag20_count} DAG(s) x 20 "
        f"steps, dag100 = {config.dag100_count} DAG(s) x 100 steps"
    )
    print(
        "# teamgraph: Runner + SQLite checkpointer and step ledger (one file, a new run and "
        "thread each time); "
        f"rounds: LangGraph Send fan-out + superstep barrier, checkpointer {ROUNDS_CHECKPOINTER}"
    )
    print("# ratio = makespan / critical path (1.000 = ideal); one warm-up run each, not counted")
    async with shared_backend():
        return await _measure_all(config)


async def _measure_all(config: Config) -> bool:
    await warm_up()
    counts = {"dag20": config.dag20_count, "dag100": config.dag100_count}
    medians = {}
    for suite, count in counts.items():
        medians[suite] = report_suite(suite, await measure_suite(suite, suite_dags(suite, count)))
    overhead_results = {
        size: await measure_overhead(size, config.overhead_repeats)
        for size in config.overhead_sizes
    }
    print(
        f"# overhead: zero-latency DAGs of {'/'.join(map(str, config.overhead_sizes))} steps, "
        f"{config.overhead_repeats} repeats each; per_step_ms = makespan / steps of the "
        f"{max(config.overhead_sizes)}-step DAG"
    )
    overhead = report_overhead(overhead_results)
    return report_targets(medians, overhead)


async def profile_runs(profiler: cProfile.Profile, repeats: int) -> list[float]:
    async with shared_backend():
        await warm_up()
        dag = dag100(GENERATORS["dag100"][1])
        return [await run_teamgraph(dag, 0.0, profiler) for _ in range(repeats)]


def profile_one(repeats: int = 5) -> None:
    """cProfile ``runner.run`` of the first zero-latency dag100 DAG, by cumulative and own time."""
    profiler = cProfile.Profile()
    makespans = asyncio.run(profile_runs(profiler, repeats))
    print(
        f"# cProfile of {repeats} zero-latency teamgraph runs of a 100-step DAG; makespans "
        f"under the profiler: {', '.join(f'{m:.3f}' for m in makespans)} s"
    )
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
        print(out.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small smoke run (< 20 s)")
    parser.add_argument("--profile", action="store_true", help="cProfile one teamgraph run")
    args = parser.parse_args(argv)
    if args.profile:
        profile_one()
        return 0
    started = time.perf_counter()
    all_met = asyncio.run(run_benchmark(QUICK if args.quick else FULL))
    print(f"# all targets met: {all_met}; wall time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
