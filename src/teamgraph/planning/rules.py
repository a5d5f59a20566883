"""Deterministic, rule-based decomposition of a request into a plan (no LLM involved)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from teamgraph.plan import Plan, PlanDecision, Step, plan_errors
from teamgraph.planning.request_structure import Comparison, parse_comparison, split_sequence
from teamgraph.planning.routing import WorkerInfo, route, routing, word_scores
from teamgraph.planning.templates import Template, instantiate, ranked, shaped
from teamgraph.prompts import split_worker_prompt
from teamgraph.text import has_cjk, is_small_talk, simplified

COMPARISON_CONFIDENCE = 0.8
SEQUENCE_CONFIDENCE = 0.7
ROUTED_CONFIDENCE = 0.6
FALLBACK_CONFIDENCE = 0.3
STRONG_TEMPLATE = 3  # a template's match score (a regex and a keyword) that outranks routing


def plan_by_rules(
    request: str,
    workers: Sequence[WorkerInfo],
    default: str | None,
    templates: Mapping[str, Template],
    *,
    max_steps: int = 10,
) -> PlanDecision:
    """The rules tier of the planner, in order: a sequence or comparison rule; a template whose
    match rules score 3 or more (a regex and a keyword) and whose workers the team has; one
    step routed to a clearly best worker; a template matched more weakly (by one of its regexes
    at least: keywords alone do not make a plan); else one step on
    ``default`` (tier ``fallback``)."""
    notes: list[str] = []
    plan = decompose(request, workers, default, max_steps=max_steps)
    if plan.confidence > ROUTED_CONFIDENCE:
        return PlanDecision(plan, "rules", tuple(notes))
    decision = _plan_by_rules(request, workers, default, templates, max_steps, plan, notes)
    return _researched_first(decision, request, workers, max_steps)


def _plan_by_rules(
    request: str,
    workers: Sequence[WorkerInfo],
    default: str | None,
    templates: Mapping[str, Template],
    max_steps: int,
    plan: Plan,
    notes: list[str],
) -> PlanDecision:
    names = [w.name for w in workers]
    fitting = _fitting_templates(request, templates, names, max_steps)
    strong = [t for score, t in fitting if score >= STRONG_TEMPLATE]
    if strong:
        return PlanDecision(instantiate(strong[0], request), "template", tuple(notes))
    if plan.confidence >= ROUTED_CONFIDENCE:
        return PlanDecision(plan, "rules", tuple(notes))
    weak = [t for _, t in fitting if shaped(t, request)]
    if weak:
        return PlanDecision(instantiate(weak[0], request), "template", tuple(notes))
    if not is_small_talk(request):  # a greeting matches nothing, as it should: no note
        notes.append("no decomposition rule, template or worker description matched the request")
    worker = default if default in names else names[0]
    return PlanDecision(fallback_plan(request, worker), "fallback", tuple(notes))


# A request that brings its own material ("review *this* essay", "translate the text below",
# "我的简历") is worked on as given; any other is about a subject the team's documents may cover.
_OWN_MATERIAL = re.compile(
    r"\b(?:this|these|attached|below|above|following)\b|```|[:：]\s*\n"
    r"|\bmy\s+(?:essay|resume|cv|cover\s+letter|letter|draft|code|paper|article|report|poem|"
    r"speech|pitch|proposal|contract|notes?|text)\b"
    r"|这[篇段份个些封]|以下|下面|如下|呢[篇段份个啲封]|我的(?:简历|文章|代码|草稿|报告|论文)",
    re.I,
)


def _researched_first(
    decision: PlanDecision, request: str, workers: Sequence[WorkerInfo], max_steps: int
) -> PlanDecision:
    """A single step on a worker that cannot search, about a subject rather than material the
    request brings, gets the findings of a worker that can first: a writer asked "Write a short
    summary of how MongoDB secures access" is not left without anything to write from."""
    plan = decision.plan
    searchers = [w for w in workers if w.searches]
    if len(plan.steps) != 1 or max_steps < 2 or not searchers or decision.tier == "fallback":
        return decision
    if _OWN_MATERIAL.search(request) or not any(word_scores(request, workers).values()):
        return decision  # its own material, or no word of a subject ("Thanks so much!")
    step = plan.steps[0]
    if any(w.name == step.worker and w.searches for w in workers):
        return decision
    searcher = route(request, searchers, searchers[0].name)
    task = _text(has_cjk(request), "find", request=request)
    found = Step(id="find_material", worker=searcher, task=task)
    answer = step.model_copy(update={"depends_on": [found.id]})
    reasoning = f"{plan.reasoning} {step.worker!r} cannot search: {searcher!r} finds the material."
    researched = plan.model_copy(update={"steps": [found, answer], "reasoning": reasoning})
    return PlanDecision(researched, decision.tier, decision.notes)


def _fitting_templates(
    request: str,
    templates: Mapping[str, Template],
    workers: list[str],
    max_steps: int,
) -> list[tuple[int, Template]]:
    """The templates matching ``request`` that the team can run, best first. One the team cannot
    run is passed over silently: nobody asked for it (a template the caller names and the team
    cannot run is noted by the planner)."""
    return [
        (score, template)
        for score, template in ranked(request, templates)
        if not plan_errors(instantiate(template, request), workers, max_steps)
    ]


def fallback_plan(request: str, worker: str) -> Plan:
    """One step: ``worker`` takes the whole request."""
    return Plan(
        name="Single step",
        reasoning=f"No plan could be made; the default worker {worker!r} takes the request.",
        confidence=0.0,
        steps=[Step(id="answer", worker=worker, task=request)],
    )


def decompose(
    request: str,
    workers: Sequence[WorkerInfo],
    default: str | None = None,
    *,
    max_steps: int = 10,
) -> Plan:
    """Split ``request`` into a plan by the first rule that matches.

    Rules, in order: an ordered sequence ("first A, then B", "1. A 2. B", "首先A，然后B") becomes
    a chain (confidence 0.7); a comparison ("compare A and B on X, Y", "A vs B: X, Y",
    "比较 A 和 B 的X、Y") becomes parallel research steps plus a summary (0.8); anything else
    is one step, routed (0.6 when one worker clearly fits it best, else 0.3). Every step goes to
    ``route(task, workers, default)``; the plan has at
    most ``max_steps`` steps. Raises :class:`ValueError` for an empty request, no workers or
    ``max_steps < 1``.
    """
    text = request.strip()
    if not text or not workers or max_steps < 1:
        raise ValueError("decompose() needs a non-empty request, workers and max_steps >= 1")
    asked, context = split_worker_prompt(text)  # a nested team's request: a step and its inputs
    if context:
        return _single_plan(text, workers, default, "A step with its inputs", None, asked)
    parts = split_sequence(text)
    if parts and max_steps > 1:
        return _chain_plan(parts, workers, default, max_steps)
    comparison = parse_comparison(text)
    if comparison is not None and max_steps > 1:
        return _comparison_plan(comparison, workers, default, max_steps)
    if parts or comparison:
        reason = "A decomposition rule matched but max_steps=1 allows a single step"
        return _single_plan(text, workers, default, reason, SEQUENCE_CONFIDENCE)
    return _single_plan(text, workers, default, "No decomposition rule matched", None)


def _single_plan(
    text: str,
    workers: Sequence[WorkerInfo],
    default: str | None,
    reason: str,
    confidence: float | None,
    routed_by: str | None = None,
) -> Plan:
    """One step doing ``text``, routed by ``routed_by`` (default: the text); ``confidence``
    None: as sure as the routing is."""
    routed = routing(routed_by or text, workers, default)
    if confidence is None:
        confidence = ROUTED_CONFIDENCE if routed.clear else FALLBACK_CONFIDENCE
        how = "its description fits the request best" if routed.clear else "no worker fits best"
        reason = f"{reason}; the whole request is one step: {how}"
    return Plan(
        name="single step",
        reasoning=f"{reason} (routed to {routed.worker!r}).",
        confidence=confidence,
        steps=[Step(id="task", worker=routed.worker, task=text)],
    )


def _chain_plan(
    parts: list[str], workers: Sequence[WorkerInfo], default: str | None, max_steps: int
) -> Plan:
    glue = "；然后" if has_cjk(" ".join(parts)) else "; then "
    tasks = [glue.join(group) for group in _groups(parts, max_steps)]
    steps: list[Step] = []
    for i, task in enumerate(tasks, start=1):
        worker = route(task, workers, default)
        if steps and worker == steps[-1].worker and _CHECKS.search(simplified(task)):
            worker = _another(task, workers, worker) or worker
        depends = [f"step_{i - 1}"] if i > 1 else []
        steps.append(Step(id=f"step_{i}", worker=worker, task=task, depends_on=depends))
    return Plan(
        name=f"Sequence of {len(steps)} steps",
        reasoning=f"Sequence rule matched: the request lists {len(parts)} ordered parts; "
        "each step depends on the previous one.",
        confidence=SEQUENCE_CONFIDENCE,
        steps=steps,
    )


# A step that checks the work of the step before ("then review it for bugs", "然后检查一下") is
# done by another worker than the one who did that work, when another one can check it.
_CHECKS = re.compile(
    r"\b(?:review|check|critique|proofread|verify|audit|fact[- ]check|double[- ]check|"
    r"sanity[- ]check|look\s+over|go\s+over|vet)\w*\b|审查|检查|校对|核对|审核|评审|核实|把关",
    re.I,
)


def _another(task: str, workers: Sequence[WorkerInfo], worker: str) -> str | None:
    """The worker, other than ``worker``, that ``task`` fits best, if a word of it fits one."""
    others = [w for w in workers if w.name != worker]
    if not others or not any(word_scores(task, others).values()):
        return None
    return routing(task, others, None).worker


_TEXTS: dict[bool, dict[str, str]] = {  # keyed by "is the request Chinese"
    False: {
        "name": "Compare {names}",
        "aspect": "Research {label} of {names}: find facts about each and how they differ.",
        "entity": "Research {label}: find the key facts, strengths and weaknesses.",
        "summary": "Write a summary comparing {names} on {aspects}, based on the research "
        "findings.",
        "compare": "Compare {names}: weigh their similarities and differences, evaluate the "
        "trade-offs and recommend one.",
        "find": "Find material for: {request}",
    },
    True: {
        "name": "比较{names}",
        "aspect": "调研{names}的{label}：查找各自的资料和事实，以及它们的不同之处。",
        "entity": "调研{label}：查找关键资料和事实，以及优点和缺点。",
        "summary": "撰写总结报告：综合{names}在{aspects}方面的调研结果，给出结论。",
        "compare": "比较{names}：权衡各自的异同与优劣，评估取舍并给出建议。",
        "find": "查找资料：{request}",
    },
}


def comparison_in_task(task: str) -> Comparison | None:
    """The comparison a comparison plan's closing step (its ``summary`` or ``compare`` task, as
    written above) asks for, or None: what a model working that step compares."""
    first = task.strip().split("\n\n", 1)[0]
    for chinese, texts in _TEXTS.items():
        for key in ("summary", "compare"):
            found = _task_pattern(texts[key]).match(first)
            if found:
                names = _split_joined(found.group("names"), chinese)
                aspects = found.groupdict().get("aspects")
                listed = _split_joined(aspects, chinese) if aspects else []
                return Comparison(tuple(names), tuple(listed), chinese)
    return None


def _task_pattern(text: str) -> re.Pattern[str]:
    pattern = re.escape(text)
    for field in ("names", "aspects"):
        pattern = pattern.replace(re.escape(f"{{{field}}}"), rf"\s*(?P<{field}>.+?)\s*")
    return re.compile(pattern + "$", re.S)


def _split_joined(text: str, chinese: bool) -> list[str]:
    """The items :func:`_join` joined."""
    parts = re.split(r"\s*(?:、|和)\s*" if chinese else r",\s*|\s+and\s+", text.strip())
    return [p.strip() for p in parts if p.strip()]


def _comparison_plan(
    comparison: Comparison, workers: Sequence[WorkerInfo], default: str | None, max_steps: int
) -> Plan:
    zh = comparison.chinese
    names = _join(list(comparison.entities), zh)
    aspects = _join(list(comparison.aspects), zh) if comparison.aspects else ""
    if comparison.aspects:
        parts = _research_tasks(comparison.aspects, names, zh, max_steps - 1)
        parts.append(("summary", _text(zh, "summary", names=names, aspects=aspects)))
        shape = f"{len(comparison.aspects)} aspects; one research step per aspect, then a summary"
    else:
        parts = _research_tasks(comparison.entities, None, zh, max_steps - 1)
        parts.append(("compare", _text(zh, "compare", names=names)))
        shape = "no aspects; one research step per entity, then a comparison"
    steps = [Step(id=i, worker=route(task, workers, default), task=task) for i, task in parts]
    steps[-1].depends_on = [s.id for s in steps[:-1]]
    return Plan(
        name=_text(zh, "name", names=names),
        reasoning=f"Comparison rule matched: {len(comparison.entities)} entities "
        f"({', '.join(comparison.entities)}) and {shape}.",
        confidence=COMPARISON_CONFIDENCE,
        entities=list(comparison.entities),
        aspects=list(comparison.aspects),
        steps=steps,
    )


def _research_tasks(
    items: Sequence[str], names: str | None, chinese: bool, limit: int
) -> list[tuple[str, str]]:
    """(id, task) of one research step per aspect of ``names`` (or per entity if ``names`` is
    None), merging the items past ``limit`` into the last step."""
    kind = "entity" if names is None else "aspect"
    tasks: list[tuple[str, str]] = []
    for i, group in enumerate(_groups(list(items), limit), start=1):
        task = _text(chinese, kind, label=_join(group, chinese), names=names or "")
        base = step_id = _slug_id(group, f"{kind}_{i}")
        n = 2
        while step_id in {t[0] for t in tasks}:
            step_id, n = f"{base}_{n}", n + 1
        tasks.append((step_id, task))
    return tasks


def _text(chinese: bool, key: str, **values: str) -> str:
    """A task text; ``str.format`` only parses the template, so braces in values are safe."""
    text = _TEXTS[chinese][key].format(**values)
    return _space(text) if chinese else text


def _groups(items: list[str], limit: int) -> list[list[str]]:
    """One group per item; past ``limit`` the last group holds all the remaining items."""
    if len(items) <= limit:
        return [[item] for item in items]
    return [[item] for item in items[: limit - 1]] + [items[limit - 1 :]]


def _join(items: list[str], chinese: bool) -> str:
    if len(items) == 1:
        return items[0]
    if chinese:
        return "、".join(items[:-1]) + "和" + items[-1]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _slug_id(group: list[str], fallback: str) -> str:
    """``research_<slug>`` for an ASCII item (``_and_more`` if merged), else ``fallback``."""
    slug = re.sub(r"[^a-z0-9]+", "_", group[0].lower()).strip("_")[:40].rstrip("_")
    if not group[0].isascii() or not slug:
        return fallback
    return f"research_{slug}" + ("_and_more" if len(group) > 1 else "")


def _space(text: str) -> str:
    """Chinese typography: a space between CJK characters and ASCII letters or digits."""
    text = re.sub(r"([\u4e00-\u9fff])([A-Za-z0-9])", r"\1 \2", text)
    return re.sub(r"([A-Za-z0-9])([\u4e00-\u9fff])", r"\1 \2", text)
