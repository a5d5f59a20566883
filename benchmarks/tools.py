"""Parallel tool calls: five 200 ms tool calls in one model turn, wall time against 200 ms.

Run: ``.venv/bin/python benchmarks/tools.py`` (about 5 s). The model is scripted (no latency),
so the wall time is the tool phase plus teamgraph's own overhead; the baseline in the same run is
the same five calls awaited one after another.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from teamgraph import Plan, Step, Team
from teamgraph.config import Settings
from teamgraph.testing import ScriptedChatModel

DELAY_S = 0.2
CALLS = 5
REPEATS = 7
TARGET = 1.2


@tool
async def slow_lookup(key: str) -> str:
    """Look a key up (takes 200 ms)."""
    await asyncio.sleep(DELAY_S)
    return f"value of {key}"


def _turn() -> AIMessage:
    calls = [{"name": "slow_lookup", "args": {"key": f"k{i}"}, "id": f"c{i}"} for i in range(CALLS)]
    return AIMessage(content="", tool_calls=calls)


async def teamgraph_tool_phase(settings: Settings) -> float:
    """Wall time from the model's tool-calling reply to the next model call."""
    stamps: list[float] = []

    def stamp(reply: object) -> object:
        stamps.append(time.perf_counter())
        return reply

    model = ScriptedChatModel(responses=[lambda m: stamp(_turn()), lambda m: stamp("done")])
    spec = {
        "name": "bench",
        "members": [{"name": "w", "description": "d", "tools": ["slow_lookup"]}],
    }
    team = Team.from_dict(spec, settings=settings, model=model, tools=[slow_lookup])
    plan = Plan(steps=[Step(id="s", worker="w", task="look up five keys")])
    result = await team.run("bench", plan=plan)
    assert result.status == "completed", result
    return stamps[1] - stamps[0]


async def sequential_baseline() -> float:
    started = time.perf_counter()
    for i in range(CALLS):
        await slow_lookup.ainvoke({"key": f"k{i}"})
    return time.perf_counter() - started


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{tmp}/bench.db")
        await teamgraph_tool_phase(settings)  # warm-up
        walls = [await teamgraph_tool_phase(settings) for _ in range(REPEATS)]
    baseline = statistics.median([await sequential_baseline() for _ in range(3)])
    ratio = statistics.median(walls) / DELAY_S
    print(
        f"tools parallel_{CALLS}x{int(DELAY_S * 1000)}ms median_ms "
        f"{statistics.median(walls) * 1000:.1f} ratio {ratio:.3f} (target <= {TARGET})"
    )
    print(
        f"tools sequential_baseline median_ms {baseline * 1000:.1f} ratio {baseline / DELAY_S:.3f}"
    )
    print(
        f"target parallel tool calls <= {TARGET} x {int(DELAY_S * 1000)} ms: "
        f"{'PASS' if ratio <= TARGET else 'MISS'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
