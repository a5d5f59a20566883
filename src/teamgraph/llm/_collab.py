"""The offline model's side of the swarm and collaborative patterns.

* **Handoffs.** An agent that receives the conversation from another one reads
  :func:`teamgraph.prompts.handoff_prompt`. The offline model answers it as if the prompt were
  the user's latest message alone: it chooses tools by overlap with the *request*, not with the
  handoff note (whose words — "transferred", "conversation", the sender's name — would otherwise
  match the handoff tools and bounce the conversation straight back).
* **Plans.** A collaborative planner without tools gets an outline of the request by the same
  keyword rules as the workflow planner (a comparison becomes one point per aspect).
* **Drafts.** A collaborative writer without tools answers extractively, taking each labelled
  block of the research (``**source**: ...``, as the offline researcher writes it) as a source
  of its own.
* **Review verdicts.** Asked for the ``ReviewVerdict`` structured output after a review prompt
  (:func:`teamgraph.prompts.collab_review_prompt`), the offline reviewer approves when the draft
  under review is non-empty, and otherwise asks for one. It cannot judge quality, so an offline
  collaborative run finishes after its first write/review round.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from teamgraph import prompts
from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, extractive_answer
from teamgraph.planning.routing import WorkerInfo
from teamgraph.planning.rules import decompose

Respond = Callable[[Sequence[BaseMessage], list[dict[str, Any]], Any], AIMessage]
Kind = Literal["handoff", "plan", "write", "verdict"]
EMPTY_DRAFT_FEEDBACK = "The draft is empty: write an answer to the request."
OUTLINE_NOTICE = OFFLINE_NOTICE.split(":", 1)[0] + ": outline by keyword rules._"
_BLOCK = re.compile(r"^\*\*(.+?)\*\*:\s*", re.MULTILINE)
_SECTION = re.compile(r"^### (.+)$", re.MULTILINE)


def handles(messages: Sequence[BaseMessage], tools: list[dict[str, Any]], tool_choice: Any) -> bool:
    """Whether the conversation is one of these patterns' own prompts."""
    return _kind(messages, tools, tool_choice) is not None


def reply(
    messages: Sequence[BaseMessage],
    tools: list[dict[str, Any]],
    tool_choice: Any,
    respond: Respond,
) -> AIMessage:
    """The offline reply; ``respond`` is the offline model's general answer to a conversation."""
    kind = _kind(messages, tools, tool_choice)
    prompt = _last_human(messages)
    if kind == "verdict":
        return _verdict(messages)
    if kind == "plan":
        return AIMessage(_outline(prompt.rsplit(f"\n\n{prompts.PLAN_INSTRUCTION}", 1)[0]))
    if kind == "write":
        return AIMessage(_draft_answer(prompt))
    request = prompt.split(prompts.USER_REQUEST_HEADING, 1)[-1].strip()
    last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    return respond(
        [*messages[:last], HumanMessage(request), *messages[last + 1 :]], tools, tool_choice
    )


def _kind(messages: Sequence[BaseMessage], tools: list[dict[str, Any]], choice: Any) -> Kind | None:
    prompt = _last_human(messages)
    if prompt.startswith(prompts.HANDOFF_HEADER):
        return "handoff"
    if tools and choice not in (None, "auto", "none", False):
        forced = tools[0]["function"]["name"]
        wanted = forced == prompts.REVIEW_VERDICT_TOOL and _draft(messages) is not None
        return "verdict" if wanted else None
    if tools or not isinstance(messages[-1], HumanMessage) or _text_protocol(messages):
        return None  # tools to call, or a conversation under way: the general rules answer
    task = prompt.split(prompts.CONTEXT_HEADING, 1)[0]
    if f"\n\n{prompts.PLAN_INSTRUCTION}" in task:
        return "plan"
    if f"\n\n{prompts.WRITE_INSTRUCTION}" in task:
        return "write"
    return None


def _last_human(messages: Sequence[BaseMessage]) -> str:
    human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    return human.text if human is not None else ""


def _text_protocol(messages: Sequence[BaseMessage]) -> bool:
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    return prompts.REACT_HEADER in system or prompts.CODEACT_HEADER in system


def _outline(request: str) -> str:
    if not request.strip():
        return f"{OUTLINE_NOTICE}\n\n1. (no request)"
    plan = decompose(request, [WorkerInfo("writer", "writes the answer")], max_steps=6)
    points = "\n".join(f"{i}. {step.task}" for i, step in enumerate(plan.steps, start=1))
    return f"{OUTLINE_NOTICE}\n\n{points}"


def _draft_answer(prompt: str) -> str:
    task, _, context = prompt.partition(prompts.CONTEXT_HEADING)
    request = task.rsplit(f"\n\n{prompts.WRITE_INSTRUCTION}", 1)[0]
    skip = {"plan", "previous draft", "reviewer feedback"}  # not facts: instructions, old text
    sources = [
        source
        for label, body in _sections(context)
        if label not in skip
        for source in _blocks(label, body)
        if source.label not in skip
    ]
    return extractive_answer(request, sources)


def _sections(context: str) -> list[tuple[str, str]]:
    parts = _SECTION.split(context)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def _blocks(label: str, text: str) -> list[Source]:
    """``**source**: text`` paragraphs as sources of their own; other text as one source."""
    parts = _BLOCK.split(text)
    found = [
        Source(parts[i].strip(), parts[i + 1].strip())
        for i in range(1, len(parts) - 1, 2)
        if parts[i + 1].strip()
    ]
    return found or ([Source(label, text)] if text.strip() else [])


def _draft(messages: Sequence[BaseMessage]) -> str | None:
    """The draft under review: the text after the review prompt's draft heading."""
    heading = f"### {prompts.DRAFT_LABEL}\n"
    for message in messages:
        text = message.text if isinstance(message, HumanMessage) else ""
        if text.startswith(prompts.REVIEW_HEADER) and heading in text:
            return text.rsplit(heading, 1)[-1].strip()
    return None


def _verdict(messages: Sequence[BaseMessage]) -> AIMessage:
    approved = bool(_draft(messages))
    args = {"approved": approved, "feedback": "" if approved else EMPTY_DRAFT_FEEDBACK}
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    return AIMessage(
        content="", tool_calls=[{"name": prompts.REVIEW_VERDICT_TOOL, "args": args, "id": call_id}]
    )
