"""One chat turn for the seed-compatible routes: pick the team, run it through the run manager,
collect what the seeds' clients expect back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from teamgraph.events import Event
from teamgraph.result import RunResult
from teamgraph.server import repositories as repo
from teamgraph.server.state import AppState
from teamgraph.specs.agent import AgentSpec
from teamgraph.specs.team import TeamSpec
from teamgraph.status import FINISHED, PAUSED
from teamgraph.storage.direct import Statement
from teamgraph.storage.models import RunRow, SessionRow, TurnResultRow


@dataclass
class Turn:
    """A finished (or paused) turn. ``notice``: what to tell the user instead of an answer
    (the run waits for a decision made elsewhere)."""

    run_id: str
    result: RunResult
    events: list[Event] = field(default_factory=list)
    notice: str = ""

    @property
    def question(self) -> str:
        asked = [e for e in self.events if e.type == "clarification_requested"]
        return asked[-1].question if asked else ""

    @property
    def approvals(self) -> list[dict[str, Any]]:
        """The tool calls this turn left waiting for a decision."""
        if self.result.status not in PAUSED:
            return []
        return [e.model_dump() for e in self.events if e.type == "approval_requested"]

    @property
    def paused(self) -> bool:
        return bool(self.question or self.approvals or self.notice)

    @property
    def answer(self) -> str:
        if self.notice:
            return self.notice
        if self.question:
            return self.question
        if self.approvals:
            return waiting_notice(self.approvals)
        if self.result.status in FINISHED:
            return self.result.output
        return f"The run ended with status {self.result.status}: {self.result.error}".strip()


def waiting_notice(calls: list[dict[str, Any]]) -> str:
    """What a chat says while tool calls wait for a human decision, and where to decide."""
    listed = "; ".join(
        f"{c.get('tool')}({json.dumps(c.get('args') or {}, ensure_ascii=False)[:300]})"
        f" asked by {c.get('agent')}"
        for c in calls
    )
    return (
        f"Waiting for your approval: {listed}. Approve or reject it on the Approvals page "
        "(GET /api/v1/approvals/pending); the answer will follow in this chat."
    )


@dataclass
class Opened:
    """A chat message taken in: the run it started or resumed (its events after
    ``after_seq`` are this turn's), or a ``notice`` when the session's run waits for a
    decision made elsewhere."""

    run_id: str
    team: str
    after_seq: int = 0
    notice: str = ""


async def open_turn(
    state: AppState,
    user_id: str,
    session: SessionRow,
    team: str,
    text: str,
    template: str | None = None,
    answer: str | None = None,
    also: Sequence[Statement] = (),
) -> Opened:
    """The user's message in a chat: a new run (stored with ``also`` in one transaction), or —
    when the session's run waits for an answer — the answer that resumes it (``answer`` when
    given, else ``text``); while it waits for a decision on a tool call, a notice that says so
    (the message starts no other run)."""
    paused = await paused_run(state, session.id)
    if paused is None:
        run_id = await state.runs.start(user_id, session, team, text, template, also)
        return Opened(run_id, team)
    waiting = await state.runs.runner(paused.team_name).pending(paused.id)
    if any(w["type"] == "clarification" for w in waiting):
        await state.runs.resume(paused.id, answer=answer or text)
        return Opened(paused.id, paused.team_name, paused.last_seq)
    calls = [w for w in waiting if w["type"] == "approval"]
    return Opened(paused.id, paused.team_name, notice=waiting_notice(calls) if calls else "")


async def chat_turn(
    state: AppState,
    user_id: str,
    session: SessionRow,
    team: str,
    text: str,
    template: str | None = None,
) -> Turn:
    """:func:`open_turn`, followed to the end of the turn."""
    opened = await open_turn(state, user_id, session, team, text, template)
    if opened.notice:
        result = await state.runs.runner(opened.team).result(opened.run_id)
        return Turn(opened.run_id, result, notice=opened.notice)
    return await _followed(state, opened.run_id, opened.team, opened.after_seq)


async def _followed(state: AppState, run_id: str, team: str, after_seq: int = 0) -> Turn:
    """The turn of a run started or resumed just now: its events after ``after_seq`` to the
    end of this execution, and its stored result."""
    events = [e async for e in state.runs.events(run_id, after_seq)]
    return Turn(run_id, await state.runs.runner(team).result(run_id), events)


async def remember_pause(state: AppState, session_id: str, text: str, run_id: str) -> None:
    """A question or notice a run paused with is the assistant's message in the history too
    (a finished run's answer is stored by the run manager)."""
    await repo.add_message(state.backend.direct, session_id, "assistant", text, run_id)


def workflow_team(state: AppState, session: SessionRow) -> str:
    """The session's team when it is a workflow team, else the first workflow team served."""
    if state.teams[session.team].spec.pattern == "workflow":
        return session.team
    return next(n for n, t in state.teams.items() if t.spec.pattern == "workflow")


def derived_team(state: AppState, base: str, suffix: str, spec: TeamSpec) -> str:
    """Serve a team derived from ``base`` (one agent alone, or a subset of members)."""
    name = f"{base}:{suffix}"
    if name not in state.teams:
        state.teams[name] = state.teams[base].derive(spec.model_copy(update={"name": name}))
    return name


def single_team(state: AppState, base: str, agent: str | None = None) -> str:
    spec = state.teams[base].spec
    members = [m for m in spec.members if isinstance(m, AgentSpec)]
    chosen = next((m for m in members if m.name == agent), members[0] if members else None)
    if chosen is None or (spec.pattern == "single" and len(spec.members) == 1):
        return base  # already one agent: keep the team as it is (questions, approvals)
    single = spec.model_copy(update={"pattern": "single", "members": [chosen], "clarify": False})
    return derived_team(state, base, f"single-{chosen.name}", single)


def filtered_team(state: AppState, base: str, include: list[str], exclude: list[str]) -> str:
    spec = state.teams[base].spec
    members = [
        m for m in spec.members if (not include or m.name in include) and m.name not in exclude
    ]
    if not members or len(members) == len(spec.members):
        return base
    key = "only-" + "-".join(sorted(m.name for m in members))
    workflow = spec.workflow.model_copy(update={"default_worker": None})
    return derived_team(
        state, base, key, spec.model_copy(update={"members": members, "workflow": workflow})
    )


async def paused_run(state: AppState, session_id: str) -> RunRow | None:
    """The session's latest run if it waits for an answer."""
    row = await state.backend.runs.latest_in_session(session_id)
    return row if row is not None and row.status in PAUSED else None


async def store_turn(state: AppState, session_id: str, run_id: str, data: dict[str, Any]) -> int:
    """Number the turn within its session and keep its orchestrator result."""
    async with state.sessions() as db:
        last = await db.scalar(
            select(func.max(TurnResultRow.turn_index)).where(TurnResultRow.session_id == session_id)
        )
        index = int(last or 0) + 1
        db.add(
            TurnResultRow(
                session_id=session_id,
                turn_index=index,
                run_id=run_id,
                data=json.loads(json.dumps({**data, "turnIndex": index})),
            )
        )
        await db.commit()
    return index
