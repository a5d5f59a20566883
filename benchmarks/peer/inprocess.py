"""The peer's in-process figure for ``benchmarks/peer_server.py`` (run in the peer's virtual
environment): the graph with LangGraph's in-memory checkpointer, ``runs`` runs by ``concurrency``
tasks; prints ``runs_per_s cpu_ms_per_run``."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from graph import build
from langgraph.checkpoint.memory import InMemorySaver


async def main(runs: int, concurrency: int) -> None:
    graph = build().compile(checkpointer=InMemorySaver())
    todo = iter(range(runs))

    async def one() -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        await graph.ainvoke({"request": "Benchmark request"}, config)

    async def worker() -> None:
        for _ in todo:
            await one()

    await one()  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{runs / wall:.2f} {cpu / runs * 1000:.3f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
