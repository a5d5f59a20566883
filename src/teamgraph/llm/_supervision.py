"""The offline model as a supervisor: delegate the request to the member whose description fits
it best — among the members that can search, when there are any: the offline model answers only
from material — then finish with an extractive answer from what the picked members reported."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage

from teamgraph import prompts
from teamgraph.brief import Brief
from teamgraph.llm._extractive import extractive_answer, quoted_sources, small_talk
from teamgraph.planning.routing import WorkerInfo, route

DELEGATE = "Look into this request and answer it:"  # one line: a member searches its first line


def supervisor_reply(brief: Brief, tools: list[dict[str, Any]]) -> AIMessage:
    """A decision as a call of the bound schema: the first time (in this user turn) pick one
    member by description overlap; once the picked members answered, finish."""
    members = [WorkerInfo(m.name, m.description, m.searches) for m in brief.members]
    entries = list(brief.transcript)
    users = [i for i, (speaker, _) in enumerate(entries) if speaker == prompts.USER_SPEAKER]
    request = entries[users[-1]][1] if users else brief.request
    turn = entries[users[-1] + 1 :] if users else entries
    delegated = prompts.delegation_speaker("")
    picked = [s.removeprefix(delegated) for s, _ in turn if s.startswith(delegated)]
    if not picked and (greeting := small_talk(request)) is not None:
        decision: dict[str, Any] = {
            "picks": [],
            "finish": True,
            "answer": greeting,
            "reasoning": "Offline: a greeting needs no member.",
        }
    elif members and request and not picked:
        agent = route(request, members)
        searchers = [m for m in members if m.searches]
        if searchers and not any(m.name == agent and m.searches for m in members):
            agent = route(request, searchers, searchers[0].name)  # it finds what to answer from
        decision = {
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
        sources = [src for name, text in answers.items() for src in quoted_sources(name, text)]
        decision = {
            "picks": [],
            "finish": True,
            "answer": extractive_answer(request, sources),
            "reasoning": "Offline: every picked member has answered.",
        }
    call = {"name": tools[0]["function"]["name"], "args": decision, "id": _call_id()}
    return AIMessage(content="", tool_calls=[call])


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"
