"""The offline model's side of the text protocols: ReAct and CodeAct.

The tools come from the request's brief; the protocol's own lines (``Observation:``,
``Execution result:``) are the grammar both sides speak, defined once in the agents that use them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from teamgraph.brief import Brief, ToolInfo
from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, extractive_answer
from teamgraph.planning.routing import overlap_score
from teamgraph.prompts import CODE_RESULT, OBSERVATION

_ARITHMETIC = re.compile(r"[-+(]*\d[\d.\s()+\-*/%]*[+\-*/%][\d.\s()+\-*/%]*\d\)*")
Fill = Callable[[dict[str, Any], str], dict[str, Any]]


def choose(task: str, tools: Sequence[ToolInfo]) -> ToolInfo | None:
    scored = [
        (overlap_score(task, f"{t.name.replace('_', ' ')} {t.description}"), i)
        for i, t in enumerate(tools)
    ]
    best = max(scored, default=(0.0, -1))
    return tools[best[1]] if best[0] > 0 else None


def replies(messages: Sequence[BaseMessage], prefix: str) -> list[str]:
    """The protocol's answers to the agent since its task: human messages starting ``prefix``
    after the last one that does not."""
    found: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, HumanMessage):
            continue
        if not message.text.startswith(prefix):
            break
        found.append(message.text.removeprefix(prefix).strip())
    return found[::-1]


def _arguments(tool: ToolInfo, task: str, fill: Fill) -> dict[str, Any]:
    return fill({"properties": tool.arguments, "required": list(tool.arguments)}, task)


def react_reply(brief: Brief, messages: Sequence[BaseMessage], fill: Fill) -> str:
    observations = replies(messages, OBSERVATION)
    tool = None if observations else choose(brief.task, brief.tools)
    if tool is not None:
        args = _arguments(tool, brief.task, fill)
        return (
            f"Thought: I should use {tool.name}.\nAction: {tool.name}\n"
            f"Action Input: {json.dumps(args)}"
        )
    found = [Source(f"observation {i + 1}", o) for i, o in enumerate(observations)]
    context = [Source(label, text) for label, text in brief.context]
    return "Thought: I know the answer.\nFinal Answer: " + extractive_answer(
        brief.task, context + found
    )


def codeact_reply(brief: Brief, messages: Sequence[BaseMessage], fill: Fill) -> str:
    results = replies(messages, CODE_RESULT)
    if results:
        last = results[-1]
        if len(last) <= 400:
            return f"{OFFLINE_NOTICE.format(n=1)}\n\nThe code printed:\n\n{last}"
        return extractive_answer(brief.task, [Source("execution result", last)])
    code = _code_for(brief, fill)
    if code is None:
        return extractive_answer(brief.task, [Source(lb, text) for lb, text in brief.context])
    return f"I will compute this with code.\n```python\n{code}\n```"


def _code_for(brief: Brief, fill: Fill) -> str | None:
    tool = choose(brief.task, brief.tools)
    if tool is not None:
        args = _arguments(tool, brief.task, fill)
        call = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"result = {tool.name}({call})\nprint(result)"
    expression = _ARITHMETIC.search(brief.task)
    if expression:
        return f"print({expression.group().strip()})"
    return None
