"""A turn as swarm-ai-chat's orchestrator object: the ``tasks`` / ``events`` / ``results`` /
``summary`` its workspace panel draws, in that client's vocabulary."""

from __future__ import annotations

import re
from typing import Any

from teamgraph.events import Event
from teamgraph.result import RunResult, StepResult
from teamgraph.server.turns import Turn
from teamgraph.status import FINISHED, StepState

# the client knows four task states; a step skipped after a failed dependency never ran
TASK_STATUS: dict[StepState, str] = {
    "pending": "pending",
    "waiting": "in_progress",
    "running": "in_progress",
    "done": "completed",
    "failed": "failed",
    "skipped": "failed",
}
TITLE_CHARS = 60
SUMMARY_CHARS = 280


def orchestrator_result(turn: Turn) -> dict[str, Any]:
    """The orchestrator data part of one ``/api/chat`` turn (``turnIndex`` is set by the
    caller once the turn is stored)."""
    result = turn.result
    gist = summary(turn)
    return {
        "type": "orchestrator",
        "success": result.status in FINISHED,
        "turnIndex": 0,
        "shouldClarify": bool(turn.question),
        "clarificationQuestion": turn.question or None,
        "summary": gist,
        "events": _events(turn, gist),
        "tasks": _tasks(result),
        "results": [
            {
                "taskId": s.id,
                "agentId": s.worker,
                "content": s.output or s.error,
                "status": s.status,
            }
            for s in result.steps
        ],
        "costUSD": result.usage.cost_usd,
    }


def _tasks(result: RunResult) -> list[dict[str, Any]]:
    planned = {s.id: s.depends_on for s in result.plan.steps} if result.plan else {}
    needed = {dep for deps in planned.values() for dep in deps}
    return [
        {
            "id": s.id,
            "title": title(s.task),
            "description": s.task,
            "assignedTo": s.worker,
            "status": TASK_STATUS[s.status],
            # a step others wait for is on the critical path
            "priority": "high" if s.id in needed else "medium",
            "dependencies": planned.get(s.id, []),
            **({"result": s.output} if s.output else {}),
            **({"error": s.error or "skipped: a step it depends on failed"} if _bad(s) else {}),
        }
        for s in result.steps
    ]


def _bad(step: StepResult) -> bool:
    return step.status in ("failed", "skipped")


def title(task: str) -> str:
    """The task's first sentence, cut at a word within :data:`TITLE_CHARS`."""
    first = re.split(r"(?<=[.!?。！？])\s*|\n", task.strip(), maxsplit=1)[0].rstrip(".。")
    if len(first) <= TITLE_CHARS:
        return first
    head = first[:TITLE_CHARS]
    if " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


def summary(turn: Turn) -> str:
    """What the turn did and the gist of its answer — never the whole answer again."""
    result = turn.result
    if turn.question:
        return f"Waiting for your answer: {turn.question}"
    if turn.paused:
        return "Waiting for a decision: " + _lead(turn.answer)
    if result.status not in FINISHED:
        return f"The run ended ({result.status}): {_lead(result.error)}"
    steps = result.steps
    agents = sorted({s.worker for s in steps})
    done = sum(s.status == "done" for s in steps)
    counted = f"{done} of {len(steps)} tasks completed by {', '.join(agents)}. " if steps else ""
    return counted + _lead(result.output)


def _lead(text: str) -> str:
    """The first paragraph of prose (headings and list markers dropped), cut at a sentence
    or a word within :data:`SUMMARY_CHARS`."""
    lines = [ln.strip().lstrip("#>*-• ").strip() for ln in text.splitlines()]
    prose = " ".join(ln for ln in lines if ln and not ln.startswith(("|", "```")))
    if len(prose) <= SUMMARY_CHARS:
        return prose
    head = prose[:SUMMARY_CHARS]
    sentence = max(head.rfind(". "), head.rfind("。"))
    if sentence > SUMMARY_CHARS // 2:
        return head[: sentence + 1]
    return head.rsplit(" ", 1)[0] + "…"


def _events(turn: Turn, gist: str) -> list[dict[str, Any]]:
    """The turn's run events as the client's ``GraphEvent`` list (``tasks_created``,
    ``task_start``, ``agent_reply``, ``task_done``, ``ask_user``, ``summary``,
    ``flow_cancelled``, ``system``); events the panel has no use for (tokens, usage, …) are
    left out."""
    out: list[dict[str, Any]] = []
    for event in turn.events:
        for n, (kind, content, agent, task) in enumerate(_described(event, gist)):
            item: dict[str, Any] = {
                "id": f"{turn.run_id}:{event.seq}" + (f".{n}" if n else ""),
                "type": kind,
                "timestamp": event.ts.isoformat(),
                "content": content,
            }
            if agent:
                item["agentId"] = agent
            if task:
                item["taskId"] = task
            out.append(item)
    return out


Described = tuple[str, str, str, str]  # (client type, content, agent, task)


def _described(event: Event, gist: str) -> list[Described]:
    if event.type.startswith("step_"):
        return _step(event)
    match event.type:
        case "plan_created":
            listed = "; ".join(f"{s['id']} → {s['worker']}" for s in event.steps)
            return [("tasks_created", f"{len(event.steps)} tasks ({event.tier}): {listed}", "", "")]
        case "handoff" if event.from_agent != event.to_agent:
            return [("system", f"{event.from_agent} → {event.to_agent}", event.to_agent, "")]
        case "clarification_requested":
            return [("ask_user", event.question, "", "")]
        case "approval_requested":
            waits = f"{event.tool} waits for approval"
            return [("system", waits, event.agent, event.step_id or "")]
        case "run_completed":
            return [("summary", gist, "", "")]
        case "run_failed":
            return [("system", f"The run failed: {event.error}", "", "")]
        case "run_cancelled":
            return [("flow_cancelled", event.reason or "cancelled", "", "")]
    return []


def _step(event: Event) -> list[Described]:
    match event.type:
        case "step_started":
            return [("task_start", event.task, event.worker, event.step_id)]
        case "step_completed":
            done = f"{event.step_id} done in {event.elapsed_s:.1f} s"
            return [
                ("agent_reply", event.output, event.worker, event.step_id),
                ("task_done", done, event.worker, event.step_id),
            ]
        case "step_failed":
            failed = f"{event.step_id} failed: {event.error}"
            return [("system", failed, event.worker, event.step_id)]
    return []
