"""The plan cache: a similar request of the same owner and team reuses the planner model's plan
with its own words; another owner, a changed spec, a team or setting that turns it off, a
request under the threshold or of another shape plan afresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from teamgraph.config import Settings
from teamgraph.plan import Plan, Step
from teamgraph.planning.plan_cache import fill, skeleton, words_of
from teamgraph.storage.cached_plans import CacheEntry, StorePlanCache
from teamgraph.testing import FunctionChatModel

from .helpers import by_type, is_planner, make_team, task_of

FIRST = "Compare Redis and Memcached on speed"
SIMILAR = "Compare Kafka and RabbitMQ on speed"


def comparison_plan(messages: list[BaseMessage]) -> str:
    """What the scripted planner answers: a comparison plan in the request's own words."""
    request = task_of(messages)
    words = words_of(request)
    a, b = words.entities
    aspect = words.aspects[0]
    return json.dumps(
        {
            "name": f"{a} vs {b}",
            "reasoning": f"research {a} and {b}, then compare",
            "confidence": 0.9,
            "entities": [a, b],
            "aspects": [aspect],
            "steps": [
                {"id": f"research_{a.lower()}", "worker": "researcher", "task": f"{a} {aspect}"},
                {"id": f"research_{b.lower()}", "worker": "researcher", "task": f"{b} {aspect}"},
                {
                    "id": "compare",
                    "worker": "analyst",
                    "task": f"Answer: {request}",
                    "depends_on": [f"research_{a.lower()}", f"research_{b.lower()}"],
                },
            ],
        }
    )


class Planner:
    """A scripted model: plans with ``plan`` and counts the planner's calls; workers answer
    'ok'."""

    def __init__(self, plan: Any = comparison_plan) -> None:
        self.planned = 0
        self.model = FunctionChatModel(fn=self.reply)
        self.plan = plan

    def reply(self, messages: list[BaseMessage]) -> str:
        if is_planner(messages):
            self.planned += 1
            return str(self.plan(messages))
        return "ok"


def team_of(settings: Settings, planner: Planner, **fields: Any) -> Any:
    workflow = fields.pop("workflow", {})
    return make_team(
        settings,
        "researcher",
        "analyst",
        "writer",
        model=planner.model,
        workflow=workflow,
        **fields,
    )


async def run(team: Any, request: str, run_id: str, **options: Any) -> tuple[Any, Any]:
    async with team.runner() as runner:
        events = [e async for e in runner.stream(request, run_id=run_id, **options)]
        return await runner.result(run_id), by_type(events, "plan_created")[0]


async def test_a_similar_request_reuses_the_plan_with_its_own_words(settings: Settings) -> None:
    planner = Planner()
    first, _ = await run(team_of(settings, planner), FIRST, "run-1")
    assert first.planner_tier == "llm"
    # a new runner on the same database: the entry survived the first one
    second, announced = await run(team_of(settings, planner), SIMILAR, "run-2")
    assert planner.planned == 1  # the second request cost no planner call
    assert second.planner_tier == "cache" and announced.tier == "cache"
    assert any("reused the plan" in note and "similarity" in note for note in announced.notes)
    plan = second.plan
    assert plan is not None
    assert [s.id for s in plan.steps] == ["research_kafka", "research_rabbitmq", "compare"]
    assert [s.task for s in plan.steps] == ["Kafka speed", "RabbitMQ speed", f"Answer: {SIMILAR}"]
    assert plan.steps[2].depends_on == ["research_kafka", "research_rabbitmq"]
    assert plan.entities == ["Kafka", "RabbitMQ"] and plan.name == "Kafka vs RabbitMQ"
    text = json.dumps(plan.to_dict()).lower()
    assert "redis" not in text and "memcached" not in text
    assert second.status == "completed"


async def test_a_request_under_the_threshold_is_planned_afresh(settings: Settings) -> None:
    planner = Planner()
    reworded = "Please compare Kafka with RabbitMQ on speed"  # similarity about 0.67
    await run(team_of(settings, planner), FIRST, "run-1")
    result, _ = await run(team_of(settings, planner), reworded, "run-2")
    assert result.planner_tier == "llm" and planner.planned == 2
    lenient = team_of(settings, planner, workflow={"plan_cache": {"threshold": 0.5}})
    await run(lenient, FIRST, "run-3")  # the spec changed: planned (and cached) afresh
    result, _ = await run(lenient, reworded, "run-4")
    assert result.planner_tier == "cache" and planner.planned == 3


async def test_a_request_of_another_shape_is_planned_afresh(settings: Settings) -> None:
    planner = Planner(lambda m: comparison_plan(m) if "speed" in task_of(m) else _one_step())
    await run(team_of(settings, planner), FIRST, "run-1")
    result, _ = await run(team_of(settings, planner), "Compare Kafka and RabbitMQ", "run-2")
    assert result.planner_tier == "llm"  # similarity 0.97, but no aspect to fill the slot


async def test_another_users_identical_request_never_reuses_the_plan(settings: Settings) -> None:
    planner = Planner()
    await run(team_of(settings, planner), FIRST, "run-1", user_id="alice")
    result, announced = await run(team_of(settings, planner), FIRST, "run-2", user_id="bob")
    assert result.planner_tier == "llm" and announced.tier == "llm"
    assert planner.planned == 2
    again, _ = await run(team_of(settings, planner), SIMILAR, "run-3", user_id="alice")
    assert again.planner_tier == "cache"


async def test_a_changed_spec_invalidates_the_teams_cached_plans(settings: Settings) -> None:
    planner = Planner()
    await run(team_of(settings, planner), FIRST, "run-1")
    changed = team_of(settings, planner, description="now with a description")
    result, _ = await run(changed, SIMILAR, "run-2")
    assert result.planner_tier == "llm" and planner.planned == 2
    back, _ = await run(team_of(settings, planner), SIMILAR, "run-3")
    assert back.planner_tier == "llm"  # the old spec's entries were deleted with the change


async def test_a_team_or_the_setting_turns_the_cache_off(
    settings: Settings, tmp_path: Path
) -> None:
    planner = Planner()
    off = team_of(settings, planner, workflow={"plan_cache": {"enabled": False}})
    for n in (1, 2):
        result, _ = await run(off, FIRST, f"run-{n}")
        assert result.planner_tier == "llm"
    globally_off = settings.model_copy(update={"plan_cache": False})
    team = team_of(globally_off, planner)
    for n in (3, 4):
        result, _ = await run(team, FIRST, f"run-{n}")
        assert result.planner_tier == "llm"
    assert planner.planned == 4


async def test_a_plan_that_would_keep_the_earlier_requests_words_is_not_reused(
    settings: Settings,
) -> None:
    def poem(messages: list[BaseMessage]) -> str:
        request = task_of(messages)
        task = "Compose a rain poem" if "rain" in request else request
        return json.dumps({"steps": [{"id": "poem", "worker": "writer", "task": task}]})

    planner = Planner(poem)
    team = team_of(settings, planner, workflow={"plan_cache": {"threshold": 0.5}})
    await run(team, "Write a poem about rain", "run-1")
    result, announced = await run(team, "Write a poem about snow", "run-2")
    assert result.planner_tier == "llm"
    assert any("would keep the words rain" in note for note in announced.notes)
    await run(team, "Write a poem about the sea", "run-3")  # its task is the request itself
    reused, _ = await run(team, "Write a poem about the moon", "run-4")
    assert reused.planner_tier == "cache"
    assert reused.plan is not None
    assert [s.task for s in reused.plan.steps] == ["Write a poem about the moon"]


def test_a_skeleton_holds_none_of_the_requests_words() -> None:
    words = words_of("Compare PostgreSQL and MongoDB on cost")
    plan = Plan(
        name="PostgreSQL or MongoDB",
        entities=["PostgreSQL", "MongoDB"],
        steps=[
            Step(id="research_postgresql", worker="r", task="postgresql cost"),
            Step(id="research_mongodb", worker="r", task="MongoDB cost"),
            Step(
                id="sum",
                worker="w",
                task="Compare PostgreSQL and MongoDB on cost",
                depends_on=["research_postgresql", "research_mongodb"],
            ),
        ],
    )
    saved = skeleton(plan, words)
    for word in ("postgresql", "mongodb", "cost"):
        assert word not in saved.lower()
    assert fill(saved, words) == plan.model_copy(
        update={
            "steps": [plan.steps[0].model_copy(update={"task": "PostgreSQL cost"}), *plan.steps[1:]]
        }
    )
    other = fill(saved, words_of("Compare 苹果 and 香蕉 on 价格"))
    assert [s.id for s in other.steps] == ["research_item1", "research_item2", "sum"]
    assert other.steps[2].task == "Compare 苹果 and 香蕉 on 价格"


async def test_a_store_keeps_entries_per_key_and_owner() -> None:
    cache = StorePlanCache(InMemoryStore())

    def entry(n: int, key: str = "k1", owner: str = "a.b@example.com") -> CacheEntry:
        return CacheEntry(f"e{n}", "team.x", key, owner, f"r{n}", b"\0\0\0\0", "{}", float(n))

    for n in range(3):
        await cache.add(entry(n), keep=2)
    await cache.add(entry(9, owner="other"), keep=2)
    assert [e.id for e in await cache.entries("k1", "a.b@example.com")] == ["e2", "e1"]
    assert [e.id for e in await cache.entries("k1", "other")] == ["e9"]
    await cache.add(entry(10, key="k2"), keep=2)  # the team's spec changed
    assert await cache.entries("k1", "a.b@example.com") == []
    assert await cache.entries("k1", "other") == []
    assert [e.id for e in await cache.entries("k2", "a.b@example.com")] == ["e10"]


def _one_step() -> str:
    return json.dumps({"steps": [{"id": "only", "worker": "analyst", "task": "compare them"}]})


async def test_the_cache_on_postgresql_reuses_per_user_and_forgets_a_changed_spec(
    pg_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=pg_url, knowledge_path=tmp_path / "kb.db")
    planner = Planner()
    await run(team_of(settings, planner), FIRST, "run-1", user_id="alice")
    other, _ = await run(team_of(settings, planner), SIMILAR, "run-2", user_id="bob")
    hit, announced = await run(team_of(settings, planner), SIMILAR, "run-3", user_id="alice")
    assert other.planner_tier == "llm"
    assert hit.planner_tier == "cache" and announced.tier == "cache" and planner.planned == 2
    changed_spec = team_of(settings, planner, description="v2")
    changed, _ = await run(changed_spec, SIMILAR, "run-4", user_id="alice")
    assert changed.planner_tier == "llm"


class Answers:
    """A stand-in plan cache: answers ``reuse`` once, then fails the test if asked again."""

    def __init__(self, reuse: Any) -> None:
        self.reuse = reuse
        self.asked = 0

    async def lookup(self, scope: Any, request: str, notes: list[str]) -> Any:
        self.asked += 1
        assert self.asked == 1, "the cache was asked again"
        return self.reuse


async def test_a_re_executed_plan_node_decides_as_the_first_execution_did(
    settings: Settings,
) -> None:
    from types import SimpleNamespace

    from teamgraph.durable import Journal
    from teamgraph.llm.provider import ModelProvider
    from teamgraph.patterns.planner import _cached_plan
    from teamgraph.planning.plan_cache import Reuse
    from teamgraph.storage.run_records import StoreJournal

    plan = Plan(steps=[Step(id="s", worker="writer", task=SIMILAR)])
    journal = Journal(StoreJournal(InMemoryStore()))
    team = team_of(settings, Planner()).spec
    for reuse, run_id in ((Reuse(plan, 0.97, FIRST), "run-1"), (None, "run-2")):
        cache = Answers(reuse)
        ctx = SimpleNamespace(
            plan_cache=cache,
            journal=journal,
            task_scope=lambda name, run_id=run_id: f"{run_id}//{name}",
            models=ModelProvider(settings, {}, FunctionChatModel(fn=lambda m: "")),
            team=team,
            templates={},
            user_id="alice",
        )
        first_notes: list[str] = []
        first = await _cached_plan(SIMILAR, ctx, first_notes)  # type: ignore[arg-type]
        again_notes: list[str] = []
        again = await _cached_plan(SIMILAR, ctx, again_notes)  # type: ignore[arg-type]
        assert again == first == (plan if reuse else None)
        assert again_notes == first_notes and cache.asked == 1
