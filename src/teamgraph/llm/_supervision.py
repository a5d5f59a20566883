"""The offline model as a supervisor: delegate the request to the member whose description fits
it best, then finish with an extractive answer from what the picked members reported."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from teamgraph import prompts
from teamgraph.llm._binding import listed_members
from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, extractive_answer
from teamgraph.planning.routing import route

_ENTRY = re.compile(r"^### \[(.+?)\]$", re.MULTILINE)
_LABELLED = re.compile(r"^\*\*(.+?)\*\*:\s*(.+)$", re.DOTALL)
_NOTICE = OFFLINE_NOTICE.split("{", 1)[0]
DELEGATE = "Look into this request and answer it:"  # one line: a member searches its first line


def supervisor_reply(messages: Sequence[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
    """A decision as a call of the bound schema: the first time (in this user turn) pick one
    member by description overlap; once the picked members answered, finish."""
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    prompt = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    members = listed_members(system, prompts.MEMBERS_HEADING)
    entries = _entries(prompt)
    users = [i for i, (speaker, _) in enumerate(entries) if speaker == prompts.USER_SPEAKER]
    request = entries[users[-1]][1] if users else ""
    turn = entries[users[-1] + 1 :] if users else entries
    delegated = prompts.delegation_speaker("")
    picked = [s.removeprefix(delegated) for s, _ in turn if s.startswith(delegated)]
    if members and request and not picked:
        agent = route(request, members)
        decision: dict[str, Any] = {
            "picks": [{"agent": agent, "instructions": f"{DELEGATE} {request}"}],
            "finish": False,
            "answer": "",
            "reasoning": f"Offline routing: {agent} best matches the request by description.",
        }
    else:
        names = {m.name for m in members}
        answers: dict[str, str] = {}
        for speaker, text in turn:
            if speaker in names and text:
                answers[speaker] = text  # a member's latest words: its answer
        sources = [src for name, text in answers.items() for src in _answer_sources(name, text)]
        decision = {
            "picks": [],
            "finish": True,
            "answer": extractive_answer(request or prompt, sources),
            "reasoning": "Offline: every picked member has answered.",
        }
    call = {"name": tools[0]["function"]["name"], "args": decision, "id": _call_id()}
    return AIMessage(content="", tool_calls=[call])


def _entries(prompt: str) -> list[tuple[str, str]]:
    """``(speaker, text)`` pairs of a transcript written by :func:`prompts.supervisor_prompt`."""
    body = prompt.split(prompts.TRANSCRIPT_HEADING, 1)[-1].split(
        f"\n{prompts.DECISION_HEADING}", 1
    )[0]
    parts = _ENTRY.split(body)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def _answer_sources(member: str, text: str) -> list[Source]:
    """A member's answer as sources: its ``**label**: text`` paragraphs keep their labels (an
    offline member quotes its sources that way); other paragraphs are the member's own."""
    sources = []
    for paragraph in re.split(r"\n\s*\n", text):
        found = _LABELLED.match(paragraph.strip())
        if found:
            sources.append(Source(found.group(1), found.group(2)))
        elif paragraph.strip() and not paragraph.startswith(_NOTICE):
            sources.append(Source(member, paragraph.strip()))
    return sources


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"
