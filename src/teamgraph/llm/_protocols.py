"""The offline model's side of the text protocols: ReAct and CodeAct."""

from __future__ import annotations

import json
import re
from typing import Any

from teamgraph import prompts
from teamgraph.llm._extractive import OFFLINE_NOTICE, Source, extractive_answer
from teamgraph.planning.routing import overlap_score

_TOOL_LINE = re.compile(r"^- (\S+): (.*?) Arguments: (\{.*\})\s*$", re.MULTILINE)
_ARITHMETIC = re.compile(r"[-+(]*\d[\d.\s()+\-*/%]*[+\-*/%][\d.\s()+\-*/%]*\d\)*")
RESULT_PREFIX = "Execution result:"
OBSERVATION = "Observation:"


def parse_tools(system: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, argument properties) of each tool line in a protocol prompt."""
    return [(n, d, json.loads(a)) for n, d, a in _TOOL_LINE.findall(system)]


def choose(task: str, tools: list[tuple[str, str, dict[str, Any]]]) -> Any:
    scored = [
        (overlap_score(task, f"{n.replace('_', ' ')} {d}"), i) for i, (n, d, _) in enumerate(tools)
    ]
    best = max(scored, default=(0.0, -1))
    return tools[best[1]] if best[0] > 0 else None


def react_reply(system: str, humans: list[str], fill: Any, sections: Any) -> str:
    task, _, context = humans[0].partition(prompts.CONTEXT_HEADING)
    observations = [
        h.removeprefix(OBSERVATION).strip() for h in humans[1:] if h.startswith(OBSERVATION)
    ]
    tool = None if observations else choose(task, parse_tools(system))
    if tool is not None:
        name, _, props = tool
        args = fill({"properties": props, "required": list(props)}, task, context)
        return f"Thought: I should use {name}.\nAction: {name}\nAction Input: {json.dumps(args)}"
    found = [Source(f"observation {i + 1}", o) for i, o in enumerate(observations)]
    return "Thought: I know the answer.\nFinal Answer: " + extractive_answer(
        task, sections(context) + found
    )


def codeact_reply(system: str, humans: list[str], fill: Any, sections: Any) -> str:
    task, _, context = humans[0].partition(prompts.CONTEXT_HEADING)
    results = [
        h.removeprefix(RESULT_PREFIX).strip() for h in humans[1:] if h.startswith(RESULT_PREFIX)
    ]
    if results:
        last = results[-1]
        if len(last) <= 400:
            return f"{OFFLINE_NOTICE.format(n=1)}\n\nThe code printed:\n\n{last}"
        return extractive_answer(task, [Source("execution result", last)])
    code = _code_for(task, context, parse_tools(system), fill)
    if code is None:
        return extractive_answer(task, sections(context))
    return f"I will compute this with code.\n```python\n{code}\n```"


def _code_for(task: str, context: str, tools: Any, fill: Any) -> str | None:
    tool = choose(task, tools)
    if tool is not None:
        name, _, props = tool
        args = fill({"properties": props, "required": list(props)}, task, context)
        call = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"result = {name}({call})\nprint(result)"
    expression = _ARITHMETIC.search(task)
    if expression:
        return f"print({expression.group().strip()})"
    return None
