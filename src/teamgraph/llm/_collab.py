"""The offline model's side of the collaborative pattern (each part recognised by its brief's
``purpose``). Handoffs in a swarm need nothing special: an agent handed the conversation works the
user's request (the brief's ``request``), not the handoff note.

* **Plans.** A collaborative planner without tools gets an outline of the request by the same
  keyword rules as the workflow planner (a comparison becomes one point per aspect).
* **Drafts.** A collaborative writer without tools answers extractively, taking each labelled
  block of the research (``**source**: ...``, as the offline researcher writes it) as a source
  of its own.
* **Review verdicts.** Asked for the ``ReviewVerdict`` structured output of a review, the
  offline reviewer approves when the draft under review is non-empty, and otherwise asks for
  one. It cannot judge quality, so an offline collaborative run finishes after its first
  write/review round.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage

from teamgraph import prompts
from teamgraph.brief import Brief
from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, extractive_answer, small_talk
from teamgraph.planning.routing import WorkerInfo
from teamgraph.planning.rules import decompose

EMPTY_DRAFT_FEEDBACK = "The draft is empty: write an answer to the request."
OUTLINE_NOTICE = OFFLINE_NOTICE.split(":", 1)[0] + ": outline by keyword rules._"
NOT_FACTS = {"plan", "previous draft", "reviewer feedback"}  # instructions and old text
_BLOCK = re.compile(r"^\*\*(.+?)\*\*:\s*", re.MULTILINE)


def handles(brief: Brief, tools: list[dict[str, Any]]) -> bool:
    """Whether the request is a collaborative role's own work: a review verdict, or an outline
    or a draft written without tools (with tools, the general rules call them first)."""
    if brief.role == "structured":
        return brief.purpose == "review"
    return brief.role == "agent" and brief.purpose in ("outline", "draft") and not tools


def reply(brief: Brief) -> AIMessage:
    if brief.role == "structured":
        return _verdict(brief)
    if (greeting := small_talk(brief.request)) is not None:
        return AIMessage(greeting)  # nothing to outline or draft
    if brief.purpose == "outline":
        return AIMessage(_outline(brief.request))
    return AIMessage(_draft_answer(brief))


def _outline(request: str) -> str:
    if not request.strip():
        return f"{OUTLINE_NOTICE}\n\n1. (no request)"
    plan = decompose(request, [WorkerInfo("writer", "writes the answer")], max_steps=6)
    points = "\n".join(f"{i}. {step.task}" for i, step in enumerate(plan.steps, start=1))
    return f"{OUTLINE_NOTICE}\n\n{points}"


def _draft_answer(brief: Brief) -> str:
    sources = [
        source
        for label, body in brief.context
        if label not in NOT_FACTS
        for source in _blocks(label, body)
        if source.label not in NOT_FACTS
    ]
    return extractive_answer(brief.request, sources)


def _blocks(label: str, text: str) -> list[Source]:
    """``**source**: text`` paragraphs as sources of their own; other text as one source."""
    parts = _BLOCK.split(text)
    found = [
        Source(parts[i].strip(), parts[i + 1].strip())
        for i in range(1, len(parts) - 1, 2)
        if parts[i + 1].strip()
    ]
    return found or ([Source(label, text)] if text.strip() else [])


def _verdict(brief: Brief) -> AIMessage:
    """Approve a non-empty draft (the offline reviewer cannot judge quality)."""
    draft = dict(brief.context).get(prompts.DRAFT_LABEL, "")
    approved = bool(draft.strip())
    args = {"approved": approved, "feedback": "" if approved else EMPTY_DRAFT_FEEDBACK}
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    name = brief.schema or prompts.REVIEW_VERDICT_TOOL
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])
