"""The offline model's replies by role, read from a request's brief: the supervisor's routing,
the moderator's, the ReAct and CodeAct protocols' turns, and the collaborating members' outlines,
drafts and review verdicts."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from teamgraph import prompts
from teamgraph.brief import Brief, ToolInfo
from teamgraph.llm._extractive import (
    OFFLINE_NOTICE,
    Source,
    extractive_answer,
    quoted_sources,
    small_talk,
)
from teamgraph.planning.request_structure import WORK_VERBS
from teamgraph.planning.routing import WorkerInfo, overlap_score, route
from teamgraph.planning.rules import decompose
from teamgraph.prompts import CODE_RESULT, OBSERVATION
from teamgraph.text import simplified

# --- supervisor --------------------------------------------------------------------------------
# The offline model as a supervisor: delegate the request to the member whose description fits it
# best — among the members that can search, when there are any: the offline model answers only
# from material — then finish with an extractive answer from what the picked members reported.
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


# --- protocols ---------------------------------------------------------------------------------
# The offline model's side of the text protocols: ReAct and CodeAct.
#
# The tools come from the request's brief; the protocol's own lines (``Observation:``, ``Execution
# result:``) are the grammar both sides speak, defined once in the agents that use them.
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


# --- moderator: The offline model as moderator: asks for clarification of very short or vague
# requests.
# A request is vague when it names no subject: every word of it is of a kind that names none.
# English kinds: function words (pronouns, determiners, prepositions, auxiliaries, particles,
# greetings, politeness, adverbs of place, time and degree), verbs that stand for any work ("do",
# "make", "fix", "handle", "take", "talk"), and nouns that ask for a hand or a view without saying
# on what ("a hand", "a favour", "any suggestions?", "a look", "a minute").
_FILLER = (
    frozenset(
        """a about again all am an and any anything are as assist assistance at be better bit can
    could deal discussed do does doing done earlier else every everything figure fix for get
    go got handle have hello help hey hi i i'm idea ideas im improve in is it it's just know
    let let's like look make me mentioned mine my need now of ok okay on one out please pls
    question questions quick quickly said should so some someone something sort sorry stuff
    sure talked tell than thanks thank that the them then there thing things think this those
    to try u up us want we what whatever will with work would yes you your""".split()
    )
    | frozenset(
        """ah advice erm favor favour feedback give got hand hmm huh input into minute moment oh
    opinion opinions reckon uh um well suggest suggestion suggestions thought thoughts tip tips view
    views""".split()
    )
    | frozenset(  # adverbs of place, time and degree; more verbs of any work or talk; the nouns
        # light verbs take ("take a look", "have a go") and more nouns of advice
        """here also too maybe really very little asap right away soon today already still
    take see change tweak finish start continue keep put use talk chat speak discuss ask say
    glance peek shot stab recommend recommendation recommendations pointer pointers hint hints
    guidance insight insights cents""".split()
    )
)
_DETERMINERS = frozenset(
    "a an the my your our their his her its this that these those some any".split()
)
# A verb of work asks for work, it does not name a subject ("Review this", "Can you test it?"),
# unless a determiner or another word makes it a noun ("run the tests", "write tests")
_WORK_VERB = re.compile(rf"(?:{WORK_VERBS})(?:e?s|e?d|ing)?", re.I)
_PRONOUNS = frozenset("it this that them these those".split())
_COMPLEMENTED = frozenset("make makes get keep leave".split())  # "make it pop": no subject
# The same in Chinese (read in simplified characters): requests, pronouns, particles, verbs that
# stand for any work ("弄", "搞", "做", "看", "改") and verbs of work with no object ("检查一下").
_ZH_FILLER = re.compile(
    r"帮帮忙|帮帮|帮忙|帮手|帮|唔该|麻烦|请|可唔可以|可不可以|能不能|能否|可以|可否|你们|你|我们|我|"
    r"佢|它|他|她|这个|那个|呢个|嗰个|这|那|呢|一下|下|弄|搞|掂|定|做|处理|点|什么|咩|乜|东西|"
    r"事情|事|随便|好|建议|意见|想法|有冇|有没有|冇|嘢|想问|问下|问|啲|些|吗|吧|啊|呀|嘛|么|了|的|得|个|之|就|都|也|想|要|需要|有|问题|"
    r"检查|翻译|总结|分析|修改|审查|校对|优化|改进|完善|解决|看|睇|改|修|试|整"
)
_REDUPLICATED = re.compile(r"([\u3400-\u9fff])\1")  # "看看", "睇睇": the verb once
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9']*")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _subjects(words: list[str]) -> list[str]:
    """The words of an English request that may name a subject (see ``_FILLER``)."""
    out: list[str] = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if word in _FILLER or (word.endswith("s") and word[:-1] in _FILLER):
            continue
        if before == "your":  # "do your magic", "your take": the helper's, not a subject
            continue
        if before in _PRONOUNS and i > 1 and words[i - 2] in _COMPLEMENTED:
            continue
        if _WORK_VERB.fullmatch(word) and (not before or before in _FILLER - _DETERMINERS):
            continue
        out.append(word)
    return out


QUESTION = (
    "Could you say more about what you need — which subject, and what kind of result "
    "(for example a comparison, a summary, a plan or code)?"
)


def is_vague(request: str) -> bool:
    """Whether ``request`` names nothing to work on: no English word of it names a subject
    (``_subjects``) and at most one Chinese character is left once its filler words are removed.
    Short requests with a subject ("Explain MVCC", "解释一下闭包") are clear."""
    text = simplified(request.strip())
    subjects = _subjects(_LATIN_WORD.findall(text.lower()))
    left = _CJK_CHAR.findall(_ZH_FILLER.sub("", _REDUPLICATED.sub(r"\1", text)))
    return not subjects and len(left) <= 1


def moderate(request: str, tool: dict[str, Any]) -> AIMessage:
    """A forced structured-output call answered by rule."""
    vague = is_vague(request)
    args = {"needs_clarification": vague, "question": QUESTION if vague else ""}
    call = {"name": tool["function"]["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])


# --- collaboration -----------------------------------------------------------------------------
# The offline model's side of the collaborative pattern (each part recognised by its brief's
# ``purpose``). Handoffs in a swarm need nothing special: an agent handed the conversation works
# the user's request (the brief's ``request``), not the handoff note.
#
# * **Plans.** A collaborative planner without tools gets an outline of the request by the same
#   keyword rules as the workflow planner (a comparison becomes one point per aspect).
# * **Drafts.** A collaborative writer without tools answers extractively, taking each labelled
#   block of the research (``**source**: ...``, as the offline researcher writes it) as a source
#   of its own.
# * **Review verdicts.** Asked for the ``ReviewVerdict`` structured output of a review, the
#   offline reviewer approves when the draft under review is non-empty, and otherwise asks for
#   one. It cannot judge quality, so an offline collaborative run finishes after its first
#   write/review round.
EMPTY_DRAFT_FEEDBACK = "The draft is empty: write an answer to the request."
OUTLINE_NOTICE = OFFLINE_NOTICE.split(":", 1)[0] + ": outline by keyword rules._"
NOT_FACTS = {"plan", "previous draft", "reviewer feedback"}  # instructions and old text
_BLOCK = re.compile(r"^\*\*(.+?)\*\*:\s*", re.MULTILINE)


def collaborates(brief: Brief, tools: list[dict[str, Any]]) -> bool:
    """Whether the request is a collaborative role's own work: a review verdict, or an outline
    or a draft written without tools (with tools, the general rules call them first)."""
    if brief.role == "structured":
        return brief.purpose == "review"
    return brief.role == "agent" and brief.purpose in ("outline", "draft") and not tools


def collaboration_reply(brief: Brief) -> AIMessage:
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
