"""A run started in-process (Python API, CLI) stores its events as a served run does: once its
stream has ended, reading them back gives exactly what was streamed, across a pause and its
resume, and from a later process."""

from __future__ import annotations

from typing import Any

from teamgraph.events import BaseEvent
from teamgraph.storage.run_store import RunStore

from .helpers import by_type, desk_team


async def _stored(store: RunStore, run_id: str) -> list[str]:
    return [event.encoded async for event in store.events(run_id, 0)]


def _encoded(events: list[BaseEvent]) -> list[str]:
    return [event.encoded for event in events]


async def test_a_streamed_run_has_stored_what_it_streamed_when_its_stream_ends(
    settings: Any,
) -> None:
    async with desk_team(settings).runner() as runner:
        paused = [e async for e in runner.stream("help me", run_id="r1")]
        assert paused[-1].type == "clarification_requested"  # type: ignore[attr-defined]
        assert await _stored(runner.backend.runs, "r1") == _encoded(paused)
        resumed = [e async for e in runner.resume_stream("r1", answer="compare SQL engines")]
        stored = await _stored(runner.backend.runs, "r1")
        assert runner.writer.task is not None and runner.writer.task.done()  # nothing pending
    assert stored == _encoded(paused + resumed)
    seqs = [e.seq for e in paused + resumed]
    assert seqs == list(range(1, len(seqs) + 1))  # one sequence across the pause
    assert by_type(resumed, "run_completed")


async def test_a_finished_run_can_be_replayed_from_a_later_process(settings: Any) -> None:
    result = await desk_team(settings).run("Compare PostgreSQL and MongoDB on cost", run_id="r2")
    async with desk_team(settings).runner() as later:  # its own storage, opened again
        events = [event async for event in later.backend.runs.events("r2", 0)]
    assert events[0].type == "run_started" and events[-1].type == "run_completed"
    assert events[-1].output == result.output and result.output  # type: ignore[union-attr]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
