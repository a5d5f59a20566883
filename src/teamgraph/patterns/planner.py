"""The workflow planner's tiers: a named template → a cached plan of a similar request
(:mod:`teamgraph.planning.plan_cache`) → the model's plan (one repair) → the rules
(decomposition, matched templates, routing) → one step on the default worker. A model planner
that fails — it raises, or its last reply is no plan at all — on a team with a
``workflow.default_worker`` goes straight to that worker (one step), as the seed does; a plan
that breaks the rules or is unsure goes to the rules. Plans are read, checked and repaired with
:mod:`teamgraph.plan`."""

from __future__ import annotations

from typing import Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from teamgraph import prompts
from teamgraph.brief import Brief, Member
from teamgraph.durable import JournalKey
from teamgraph.errors import RunStop
from teamgraph.llm.call import Caller, ask
from teamgraph.llm.resolve import is_offline
from teamgraph.plan import Plan, PlanDecision, PlanRules
from teamgraph.planning.plan_cache import Scope
from teamgraph.planning.routing import WorkerInfo
from teamgraph.planning.rules import fallback_plan, plan_by_rules
from teamgraph.planning.templates import Template, instantiate
from teamgraph.run_context import RunContext
from teamgraph.specs.team import TeamSpec

PLANNER = "planner"  # the role: its model override and the usage it is charged


def plan_rules(team: TeamSpec) -> PlanRules:
    """The rules a plan for ``team`` obeys: its members are the workers, at most
    ``workflow.max_steps`` steps."""
    return PlanRules(tuple(m.name for m in team.members), team.workflow.max_steps)


async def make_plan(request: str, ctx: RunContext, template: str | None = None) -> PlanDecision:
    """Run the tiers in order; the first valid plan wins."""
    notes: list[str] = []
    templates: dict[str, Template] = ctx.templates
    if template:
        found = templates.get(template)
        if found is None:
            notes.append(f"unknown template {template!r}; planning with the model instead")
        else:
            plan = _checked(instantiate(found, request), ctx, notes, f"template {template!r}")
            if plan:
                return PlanDecision(plan, "template", tuple(notes))
    team = ctx.team
    if not _offline_planner(ctx):  # the offline model would plan by the same rules
        reused = await _cached_plan(request, ctx, notes)
        if reused:
            return PlanDecision(reused, "cache", tuple(notes))
        planned = await _model_plan(request, ctx, notes)
        if isinstance(planned, Plan):
            await _remember(request, ctx, planned, notes)
            return PlanDecision(planned, "llm", tuple(notes))
        if planned == FAILED and team.workflow.default_worker:
            notes.append(f"the model planner failed: one step on {team.default_worker!r}")
            return PlanDecision(
                fallback_plan(request, team.default_worker), "fallback", tuple(notes)
            )
    ruled = plan_by_rules(
        request,
        [WorkerInfo(m.name, m.description, m.searches) for m in team.members],
        team.default_worker,
        templates,
        max_steps=team.workflow.max_steps,
    )
    return PlanDecision(ruled.plan, ruled.tier, (*notes, *ruled.notes))


FAILED: Final = "failed"  # the model planner raised, or its last reply was no plan at all


async def _model_plan(
    request: str, ctx: RunContext, notes: list[str]
) -> Plan | Literal["failed"] | None:
    """The model's plan; ``None`` when it breaks the rules or is unsure (the rules tier
    decides), :data:`FAILED` when the planner gave no plan at all."""
    team, opts = ctx.team, ctx.team.workflow
    model, model_name = ctx.models.for_role(PLANNER, team.model, team.model_kwargs)
    system = prompts.planner_system(
        team.name,
        [(m.name, m.description) for m in team.members],
        [(t.name, t.description) for t in ctx.templates.values()],
        opts.max_steps,
    )
    messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(request)]
    workers = tuple(Member(m.name, m.description) for m in team.members)
    brief = Brief(role="planner", request=request, members=workers, max_steps=opts.max_steps)
    scope = JournalKey.task(ctx.task_scope(PLANNER))
    caller = Caller(PLANNER, model, model_name)
    rules = plan_rules(team)
    for attempt in range(2):
        try:
            reply = await ask(ctx, caller, messages, scope.model_call(attempt + 1), brief)
        except RunStop:
            raise  # the run stops (budget, provider down): not a planner failure
        except Exception as exc:  # the planner's failure: the default worker, or the rules
            notes.append(f"model planner failed: {type(exc).__name__}: {exc}")
            return FAILED
        plan, errors = rules.parse(reply.text)
        if plan is not None and not errors:
            if plan.confidence >= opts.confidence_threshold:
                return plan
            notes.append(
                f"model plan confidence {plan.confidence:.2f} is under the threshold "
                f"{opts.confidence_threshold:.2f}"
            )
            return None
        notes.append(f"model plan invalid (attempt {attempt + 1}): {'; '.join(errors)}")
        messages += [AIMessage(reply.text), HumanMessage(prompts.repair_message(errors))]
    return FAILED if plan is None else None


def _cache_scope(ctx: RunContext) -> Scope:
    _, planner = ctx.models.for_role(PLANNER, ctx.team.model, ctx.team.model_kwargs)
    return Scope(ctx.team, ctx.templates, planner, ctx.user_id)


async def _cached_plan(request: str, ctx: RunContext, notes: list[str]) -> Plan | None:
    """The plan of a similar earlier request of the same owner, made fit for this one (none:
    the model plans). What the cache answered is journaled: a re-executed plan node decides
    as the first execution did."""
    if ctx.plan_cache is None:
        return None
    key = JournalKey.task(ctx.task_scope(PLANNER)).cache_lookup()
    asked, found = await ctx.journal.cache_answer(key)
    if asked:
        if found is None:
            return None
        notes.extend(found["notes"])
        return Plan.from_dict(found["plan"])
    cache_notes: list[str] = []
    try:
        reused = await ctx.plan_cache.lookup(_cache_scope(ctx), request, cache_notes)
    except RunStop:
        raise
    except Exception as exc:  # a cache that fails is a cache that missed
        reused, cache_notes = None, [f"plan cache unavailable: {type(exc).__name__}: {exc}"]
    if reused is not None:
        cache_notes.append(
            f"reused the plan of an earlier similar request (similarity {reused.similarity:.2f})"
        )
    notes.extend(cache_notes)
    found = None if reused is None else {"plan": reused.plan.to_dict(), "notes": cache_notes}
    await ctx.journal.keep_cache_answer(key, found)
    return None if reused is None else reused.plan


async def _remember(request: str, ctx: RunContext, plan: Plan, notes: list[str]) -> None:
    if ctx.plan_cache is None:
        return
    try:
        await ctx.plan_cache.remember(_cache_scope(ctx), request, plan)
    except RunStop:
        raise
    except Exception as exc:  # the plan stands; only its reuse is lost
        notes.append(f"plan not cached: {type(exc).__name__}: {exc}")


def _offline_planner(ctx: RunContext) -> bool:
    """Whether the planner's model is the offline model (whose plans the rules make)."""
    _, name = ctx.models.for_role(PLANNER, ctx.team.model, ctx.team.model_kwargs)
    return is_offline(name)


def _checked(plan: Plan, ctx: RunContext, notes: list[str], what: str) -> Plan | None:
    errors = plan_rules(ctx.team).errors(plan)
    if errors:
        notes.append(f"{what} does not fit this team: {'; '.join(errors)}")
        return None
    return plan
