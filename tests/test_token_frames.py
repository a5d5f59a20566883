"""Token frames: streamed text as few events as a reader needs, joined exactly."""

from __future__ import annotations

from typing import Any

from teamgraph.llm.call import Frames
from teamgraph.runtime.team_api import Team

from .helpers import by_type, eventually, run_collect


async def test_the_first_piece_goes_at_once_and_the_rest_within_the_interval() -> None:
    sent: list[str] = []
    frames = Frames(sent.append, interval=0.05, chars=100)
    frames.add("Hello")
    assert sent == ["Hello"]  # the first token is not held back
    frames.add(", ")
    frames.add("world")
    assert sent == ["Hello"]  # held: sent within the interval
    await eventually(lambda: len(sent) > 1, "the held pieces are sent")
    assert sent == ["Hello", ", world"]  # the timer sent them, without a further piece


async def test_a_frame_goes_as_soon_as_it_is_full_and_flush_sends_the_rest() -> None:
    sent: list[str] = []
    frames = Frames(sent.append, interval=10.0, chars=8)
    for piece in ["a", "bcd", "efgh", "ij", "k"]:
        frames.add(piece)
    assert sent == ["a", "bcdefghij"]  # 9 characters waiting ≥ 8: sent at once
    frames.flush()
    assert "".join(sent) == "abcdefghijk" and sent[-1] == "k"
    frames.flush()
    assert "".join(sent) == "abcdefghijk"  # nothing waits: nothing more is sent


async def test_interval_zero_sends_every_piece() -> None:
    sent: list[str] = []
    frames = Frames(sent.append, interval=0.0, chars=1000)
    for piece in ["a", "b", "c"]:
        frames.add(piece)
    assert sent == ["a", "b", "c"]


async def test_a_streamed_answer_is_a_few_frames_that_join_to_it(settings: Any) -> None:
    spec = {"name": "one", "pattern": "single", "members": ["writer"]}
    framed = Team.from_dict(spec, settings=settings)
    result, events = await run_collect(framed, "Summarize the benefits of testing")
    tokens = [e.text for e in by_type(events, "token")]
    assert "".join(tokens) == result.output  # a replay reproduces the text exactly
    every = settings.model_copy(update={"token_frame_ms": 0})
    unframed_team = Team.from_dict(spec, settings=every)
    _, unframed = await run_collect(
        unframed_team, "Summarize the benefits of testing", run_id="run-2"
    )
    chunks = [e.text for e in by_type(unframed, "token")]  # one per model chunk without frames
    assert "".join(chunks) == result.output
    assert len(tokens) <= 3 < len(chunks)  # the first piece, then the rest in one frame
