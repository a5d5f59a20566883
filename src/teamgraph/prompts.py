"""The prompts teamgraph sends to models.

Prompts are for models that read: reword them freely. What a request is *for* travels beside the
prompt as a :class:`~teamgraph.brief.Brief`, which teamgraph's own models (the offline model, the
test doubles) read instead of the text; the functions that build what a member is asked return an
:class:`~teamgraph.brief.Assignment` carrying both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from teamgraph.brief import Assignment, Brief, Purpose

PLANNER_HEADER = "You are the planner of the team"
SYNTHESIZER_HEADER = "You are the synthesizer of the team"
WORKERS_HEADING = "## Workers"
TEMPLATES_HEADING = "## Templates"
CONTEXT_HEADING = "## Context from previous steps"
STEP_RESULTS_HEADING = "## Step results"
REQUEST_HEADING = "## Request"

PLAN_JSON_SHAPE = (
    '{"name": "<short plan name>", "reasoning": "<why these steps>", "confidence": <0..1>, '
    '"entities": ["<key things the request is about>"], "steps": [{"id": "<unique_id>", '
    '"worker": "<worker name>", "task": "<self-contained instruction>", "depends_on": ["<id>"]}]}'
)


def planner_system(
    team: str,
    workers: Iterable[tuple[str, str]],
    templates: Iterable[tuple[str, str]],
    max_steps: int,
) -> str:
    """System prompt of the workflow planner: lists workers and templates automatically."""
    worker_lines = "\n".join(f"- {name}: {desc}" for name, desc in workers)
    template_lines = "\n".join(f"- {name}: {desc}" for name, desc in templates) or "- (none)"
    return (
        f"{PLANNER_HEADER} {team!r}. Break the user's request into steps for the workers below. "
        "Steps that do not depend on each other run in parallel; a step sees only the outputs "
        "of the steps it depends on.\n\n"
        f"{WORKERS_HEADING}\n{worker_lines}\n\n"
        f"{TEMPLATES_HEADING} (known plans you may follow)\n{template_lines}\n\n"
        "## Output\n"
        f"Respond with one JSON object and nothing else, shaped like:\n{PLAN_JSON_SHAPE}\n"
        f"Use between 1 and {max_steps} steps, unique ids, only the workers listed, and "
        "depends_on only ids of other steps (no cycles). Set confidence to how sure you are that "
        "the plan answers the request."
    )


def repair_message(errors: list[str]) -> str:
    """Sent back to the planner once when its plan fails validation."""
    listed = "\n".join(f"- {e}" for e in errors)
    return (
        f"Your plan is invalid:\n{listed}\n\nReturn a corrected plan as one JSON object "
        "with the same shape, and nothing else."
    )


def worker_system(name: str, description: str, instructions: str) -> str:
    return f"You are {name}, {description}\n\n{instructions}".strip()


def worker_prompt(task: str, context: list[tuple[str, str]]) -> str:
    """The task, plus the outputs of the step's own dependencies, each labelled by step id."""
    if not context:
        return task
    blocks = "\n\n".join(f"### {step_id}\n{output}" for step_id, output in context)
    return f"{task}\n\n{CONTEXT_HEADING}\n\n{blocks}"


def split_worker_prompt(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A :func:`worker_prompt` read back: the task and the labelled outputs under it (as a
    nested team receives a step's prompt as its request)."""
    task, found, rest = text.partition(f"\n\n{CONTEXT_HEADING}\n\n")
    if not found:
        return text, []
    blocks = re.split(r"(?:^|\n\n)### ", "\n\n" + rest)
    context = []
    for block in filter(None, blocks):
        label, _, output = block.partition("\n")
        context.append((label.strip(), output.strip()))
    return task, context


def worker_assignment(
    task: str, context: Sequence[tuple[str, str]] = (), request: str = ""
) -> Assignment:
    """A task with the outputs it depends on (a workflow step, a delegation)."""
    brief = Brief(role="agent", request=request or task, task=task, context=tuple(context))
    return Assignment(worker_prompt(task, list(context)), brief)


def synthesizer_system(team: str) -> str:
    return (
        f"{SYNTHESIZER_HEADER} {team!r}. Using only the step results below, write the final "
        "answer to the user's request. Be complete and concise; say where results are missing."
    )


def synthesizer_prompt(request: str, results: list[tuple[str, str, str]]) -> str:
    blocks = "\n\n".join(f"### {sid} ({worker})\n{output}" for sid, worker, output in results)
    return f"{REQUEST_HEADING}\n{request}\n\n{STEP_RESULTS_HEADING}\n\n{blocks}"


LIMIT_REACHED = (
    "You have reached the limit of steps for this task. Do not call any tools. Answer now with "
    "what you have found so far, and say what is missing."
)

REACT_HEADER = "Answer the task by reasoning step by step and using tools."


def react_system(agent_system: str, tools: str, tool_names: list[str]) -> str:
    """The ReAct text protocol, for models without native tool calling."""
    names = ", ".join(tool_names) or "none"
    return (
        f"{agent_system}\n\n{REACT_HEADER} You have these tools:\n{tools}\n\n"
        "Use exactly this format:\n"
        "Thought: what you think and what to do next\n"
        f"Action: the tool to use, one of [{names}]\n"
        "Action Input: the tool's arguments as one JSON object\n"
        "Then stop; the tool's result comes back to you as 'Observation: ...'. Repeat as needed. "
        "When you know the answer, write:\n"
        "Thought: I know the answer.\n"
        "Final Answer: the answer to the task"
    )


OBSERVATION = "Observation:"  # the ReAct protocol: a tool's result goes back on this line


def observation(result: str) -> str:
    return f"{OBSERVATION} {result}"


def react_format_error(error: str) -> str:
    return f"Error while parsing the output: {error}. Follow the format exactly."


CODEACT_HEADER = "Solve the task by writing Python code that runs in a sandbox."
CODE_RESULT = "Execution result:"  # the CodeAct protocol: what the code printed comes back so


def code_result(result: str) -> str:
    return f"{CODE_RESULT}\n{result}"


def codeact_system(agent_system: str, functions: str) -> str:
    return (
        f"{agent_system}\n\n{CODEACT_HEADER} Put the code in one ```python block. It runs in an "
        "isolated process (no network, a temporary working directory, time and memory limits); "
        "you get back its stdout, stderr, the value of its last expression and any error. These "
        f"functions are available in the code:\n{functions}\n"
        "Variables do not persist between blocks. When you have the answer, reply with the final "
        "answer as plain text, without a code block."
    )


def structured_request(schema: str) -> str:
    return f"Now return your final answer as structured output matching this schema:\n{schema}"


def structured_retry(error: str) -> str:
    return (
        f"Your structured output was invalid: {error}\nReturn corrected structured output that "
        "matches the schema."
    )


MODERATOR_HEADER = "You are the moderator of the team"


def moderator_system(team: str, members: list[tuple[str, str]]) -> str:
    listed = "\n".join(f"- {name}: {desc}" for name, desc in members)
    return (
        f"{MODERATOR_HEADER} {team!r}. Before the team starts, decide whether the user's request "
        "is clear enough to act on. Ask one short clarifying question only when the request is "
        "too vague or ambiguous to plan (for example it names no subject, or could mean very "
        f"different things). The team:\n{listed}"
    )


SUPERVISOR_HEADER = "You are the supervisor of the team"
MEMBERS_HEADING = "## Members"
TRANSCRIPT_HEADING = "## Transcript so far"
DECISION_HEADING = "## Your decision"
USER_SPEAKER = "user"
SUPERVISOR_SPEAKER = "supervisor"


def supervisor_system(team: str, members: Iterable[tuple[str, str]]) -> str:
    """System prompt of the supervisor: its members (name and description) and how to decide."""
    member_lines = "\n".join(f"- {name}: {desc}" for name, desc in members)
    return (
        f"{SUPERVISOR_HEADER} {team!r}. You do not do the work yourself: you delegate it to the "
        "members below, read what they report, and decide when the user's request is answered."
        f"\n\n{MEMBERS_HEADING}\n{member_lines}\n\n"
        "## How to decide\n"
        "Return one decision per turn:\n"
        "- To delegate, list one or more `picks`, each a member name and self-contained "
        "`instructions`, and set `finish` to false. Several picks run in parallel, so pick "
        "several members at once only for independent work. Members see the transcript too.\n"
        "- When the transcript answers the request, set `finish` to true, leave `picks` empty and "
        "write the final `answer` for the user, using only what the members reported.\n"
        "Say briefly why in `reasoning`. Pick only members listed above; if a member reports an "
        "error, pick another member or finish with what you have."
    )


def transcript_entry(speaker: str, text: str) -> str:
    """One entry of a transcript shown as text: ``### [speaker]`` then the text."""
    return f"### [{speaker}]\n{text.strip()}"


def supervisor_prompt(entries: Iterable[tuple[str, str]]) -> str:
    """The transcript so far (``(speaker, text)`` pairs, oldest first) and the question."""
    body = "\n\n".join(transcript_entry(s, t) for s, t in entries) or "(empty)"
    return f"{TRANSCRIPT_HEADING}\n\n{body}\n\n{DECISION_HEADING}\nReturn your next decision."


def delegation_speaker(member: str) -> str:
    """Transcript speaker of the supervisor's instructions to ``member``."""
    return f"{SUPERVISOR_SPEAKER} → {member}"


def specialist_error(member: str, error: str) -> str:
    """What the supervisor is told when a member raised instead of answering."""
    return f"The {member} specialist encountered an error: {error}"


def unknown_member(name: str, members: Iterable[str]) -> str:
    """What the supervisor is told when it picked a name that is not a member."""
    return (
        f"Error: there is no member named {name!r}. Valid members: {', '.join(members)}. "
        "Pick one of them, or finish."
    )


# --- swarm: handoffs between agents ---

HANDOFF_HEADER = "The conversation was transferred to you"
USER_REQUEST_HEADING = "## The user's latest message"


def handoff_assignment(from_agent: str, request: str) -> Assignment:
    """What an agent reads when another agent hands it the conversation in the middle of a
    turn: the conversation so far comes before it, the user's latest message is repeated."""
    text = (
        f"{HANDOFF_HEADER} by {from_agent}. Continue it: answer the user's latest message "
        "yourself, or transfer the conversation to a teammate better suited.\n\n"
        f"{USER_REQUEST_HEADING}\n{request}"
    )
    brief = Brief(role="agent", request=request, task=request, handoff_from=from_agent)
    return Assignment(text, brief)


# --- collaborative: plan → research → write → review ---

PLAN_INSTRUCTION = "Plan the answer to the request above:"
WRITE_INSTRUCTION = "Write the answer to the request above,"
REVIEW_HEADER = "Review the draft answer to this request:"
REVIEW_VERDICT_TOOL = "ReviewVerdict"  # the reviewer's structured output (its schema's title)
DRAFT_LABEL = "draft"  # the review prompt's last context block: the draft under review


def _blocks(*pairs: tuple[str, str]) -> list[tuple[str, str]]:
    return [(label, text.strip()) for label, text in pairs if text.strip()]


def _collab(
    request: str, task: str, purpose: Purpose, context: list[tuple[str, str]]
) -> Assignment:
    brief = Brief(role="agent", request=request, task=task, context=tuple(context), purpose=purpose)
    return Assignment(worker_prompt(task, context), brief)


def collab_plan(request: str) -> Assignment:
    task = (
        f"{request}\n\n{PLAN_INSTRUCTION} list the points it must cover, in order, in a few "
        "short lines. Do not write the answer itself."
    )
    return _collab(request, task, "outline", [])


def collab_research(request: str, plan: str, feedback: str = "") -> Assignment:
    task = (
        f"{request}\n\nResearch the facts needed to answer the request above. Quote what you "
        "find and name the source of every fact."
    )
    if feedback.strip():
        task += " The reviewer asked for changes: find what they need."
    context = _blocks(("plan", plan), ("reviewer feedback", feedback))
    return _collab(request, task, "research", context)


def collab_write(
    request: str, plan: str, research: str, draft: str = "", feedback: str = ""
) -> Assignment:
    task = (
        f"{request}\n\n{WRITE_INSTRUCTION} following the plan and using the research below; "
        "keep every claim traceable to the research."
    )
    if feedback.strip():
        task += " Revise your previous draft so that it addresses all of the reviewer's feedback."
    context = _blocks(
        ("plan", plan),
        ("research", research),
        ("previous draft", draft),
        ("reviewer feedback", feedback),
    )
    return _collab(request, task, "draft", context)


def collab_review(request: str, research: str, draft: str) -> Assignment:
    """The draft comes last, so everything after its heading is the draft."""
    task = (
        f"{REVIEW_HEADER} {request}\n\nCheck that the draft answers the request, is correct and "
        "complete, and is supported by the research. Approve it when it is good enough; "
        "otherwise say exactly what to change."
    )
    blocks = "\n\n".join(f"### {label}\n{text}" for label, text in _blocks(("research", research)))
    head = f"{task}\n\n{CONTEXT_HEADING}\n\n" + (f"{blocks}\n\n" if blocks else "")
    context = (*_blocks(("research", research)), (DRAFT_LABEL, draft.strip()))
    brief = Brief(role="agent", request=request, task=task, context=context, purpose="review")
    return Assignment(f"{head}### {DRAFT_LABEL}\n{draft.strip()}", brief)
