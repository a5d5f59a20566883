"""Durable step results, keyed by run id and step id — never by call order.

A resumed workflow asks the ledger which steps already finished and hands every step its own
result, whatever order the steps completed in the first time. Backed by LangGraph's ``BaseStore``
(SQLite by default), in the same database as the checkpoints.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from langgraph.store.base import BaseStore
from pydantic import BaseModel

from teamgraph.events import TokenUsage

StepOutcome = Literal["done", "failed", "skipped"]


class StepRecord(BaseModel):
    """What a finished step produced."""

    step_id: str
    worker: str
    status: StepOutcome
    output: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    usage: TokenUsage = TokenUsage()


class StepLedger(Protocol):
    async def load(self, run_id: str) -> dict[str, StepRecord]: ...

    async def save(self, run_id: str, record: StepRecord) -> None: ...


class StoreLedger:
    """A :class:`StepLedger` in a LangGraph store, namespace ``("teamgraph", "steps", run_id)``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    async def load(self, run_id: str) -> dict[str, StepRecord]:
        items = await self.store.asearch(("teamgraph", "steps", run_id), limit=100_000)
        return {item.key: StepRecord.model_validate(item.value) for item in items}

    async def save(self, run_id: str, record: StepRecord) -> None:
        value: dict[str, Any] = record.model_dump(mode="json")
        await self.store.aput(("teamgraph", "steps", run_id), record.step_id, value, index=False)


class MemoryLedger:
    """A :class:`StepLedger` in memory, for tests and one-off runs."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, StepRecord]] = {}

    async def load(self, run_id: str) -> dict[str, StepRecord]:
        return dict(self.records.get(run_id, {}))

    async def save(self, run_id: str, record: StepRecord) -> None:
        self.records.setdefault(run_id, {})[record.step_id] = record
