"""The adapter interface every wire dialect implements, and the plumbing they share.

A dialect adapter is one module (here, or in :mod:`teamgraph.server.compat` for the clients
of the projects the server grew from) with two parts:

1. **Requests in**: its routes (a FastAPI ``router``) parse the dialect's request into an
   :data:`~teamgraph.server.turns.Intent` — :class:`~teamgraph.server.turns.Start`,
   :class:`~teamgraph.server.turns.Answer` or :class:`~teamgraph.server.turns.Resume` — which
   :func:`~teamgraph.server.turns.open_turn` carries out for the caller's session: the run is
   stored and started (or resumed) before the response begins, so a refusal is an HTTP error,
   never a broken stream.
2. **Events out**: an :class:`EventStream` subclass translates the turn's typed
   :mod:`teamgraph.events` into the dialect's frames — :meth:`~EventStream.on_start`,
   :meth:`~EventStream.on_event` (for every event, in ``seq`` order), :meth:`~EventStream.on_end`
   (once the run ends or pauses), :meth:`~EventStream.on_error` — and writes each frame with
   :meth:`~EventStream.encode`, through the one framer (:mod:`teamgraph.server.sse`).
   :meth:`~EventStream.response` is the streamed response: the events are read as the run
   manager serves them (from memory while the run executes here, from the database otherwise),
   and the frames of the events ready together go out in one write.

Add a protocol by adding one such module and listing its router in
:data:`teamgraph.server.protocols.ROUTERS`; nothing else changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

from starlette.responses import StreamingResponse

from teamgraph.events import Event
from teamgraph.result import RunResult
from teamgraph.runtime import event_log as rl
from teamgraph.server.sse import SSE, Final, streaming_response
from teamgraph.server.state import AppState
from teamgraph.server.turns import Opened, result_of

F = TypeVar("F")  # one frame of the dialect, before it is written


class EventStream(ABC, Generic[F]):
    """One turn's events as a dialect's frames. Subclasses keep whatever state the dialect
    needs between events (open messages, ids, what was said)."""

    media_type: ClassVar[str] = SSE

    def __init__(self, state: AppState, turn: Opened) -> None:
        self.state = state
        self.turn = turn
        self._result: RunResult | None = None

    async def on_start(self) -> AsyncIterator[F]:
        """Frames before the run's first event (default: none)."""
        return
        yield

    @abstractmethod
    def on_event(self, event: Event) -> Iterable[F]:
        """The frames one event of the run becomes (often none)."""

    async def on_end(self) -> AsyncIterator[F]:
        """Frames once the run has ended or paused, or — for a :attr:`~Opened.notice` turn —
        at once after :meth:`on_start` (default: none)."""
        return
        yield

    def on_error(self, error: Exception) -> Iterable[F]:
        """The frames that end a stream that failed after it began (default: none, the error
        propagates and the connection is cut)."""
        raise error

    @abstractmethod
    def encode(self, frame: F) -> str:
        """One frame as the dialect writes it (through :mod:`teamgraph.server.sse`)."""

    def encode_batch(self, events: Sequence[Event]) -> str:
        """The frames of events ready together, as one write."""
        return "".join([self.encode(f) for event in events for f in self.on_event(event)])

    async def result(self) -> RunResult:
        """The run's stored result (read once, when a dialect's ending needs it)."""
        if self._result is None:
            self._result = await result_of(self.state, self.turn)
        return self._result

    async def stream(self) -> AsyncIterator[str]:
        """The whole stream: the start, the turn's events as they come, the end. The frames of
        the batch that ends or pauses the run are held back and written with the ending's, as
        the response's last write (:class:`~teamgraph.server.sse.Final`): the client has the
        whole response when it reads the run's last event."""
        last = ""
        try:
            async for frame in self.on_start():
                yield self.encode(frame)
            if not self.turn.notice:
                async for batch in self.state.runs.batches(self.turn.run_id, self.turn.after_seq):
                    written = last + self.encode_batch(batch)
                    last = written if any(rl.kind(e) in rl.STOPS for e in batch) else ""
                    if written and not last:
                        yield written
            ending = [self.encode(frame) async for frame in self.on_end()]
            yield Final(last + "".join(ending))
        except Exception as error:
            yield Final(last + "".join(self.encode(frame) for frame in self.on_error(error)))

    def response(self, headers: Mapping[str, str] | None = None) -> StreamingResponse:
        return streaming_response(self.stream(), self.media_type, headers)
