"""Every pattern over each provider's real wire protocol (OpenAI Chat Completions, Anthropic
Messages, Ollama), streamed and not: the real LangChain clients, configured through teamgraph's
settings as a user's key would be, talk HTTP to a fake provider on 127.0.0.1 that answers as the
offline model would. A team must then run exactly as it runs offline — same plan, same steps,
same answer — with the provider's own token counts as its usage."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamgraph import Settings, Team
from teamgraph.events import Event
from teamgraph.llm.pricing import PriceTable
from teamgraph.plan import Plan, Step
from teamgraph.result import RunResult

from .fake_providers import FakeProvider, Refuse, Say, sending_briefs

REPO = Path(__file__).resolve().parents[1]
MODELS = {
    "openai": "openai:gpt-4o-mini",
    "anthropic": "anthropic:claude-haiku-4-5",
    "ollama": "ollama:llama3.2",
}
KEY = "sk-test-0123456789abcdef"  # never a real key: the fake provider takes any
REQUEST = "Compare PostgreSQL and MongoDB on performance, security and cost"
PATTERNS = {
    "workflow": ("research.yaml", REQUEST),
    "supervisor": ("supervisor.yaml", REQUEST),
    "swarm": ("swarm.yaml", REQUEST),
    "nested": ("hierarchical.yaml", REQUEST),
    "collaborative": ("collaborative.yaml", REQUEST),
    "single": ("single.yaml", "Find what PostgreSQL offers for JSON documents"),
}

pytestmark = pytest.mark.allow_model_construction


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider, sending_briefs():
        yield provider


def on_wire(
    tmp: Path, fake: FakeProvider, wire: str, *, streaming: bool = True, **options: Any
) -> Settings:
    """Settings that send every model call of ``wire``'s model to the fake provider."""
    entry = {"base_url": fake.url(wire), "streaming": streaming, **options}
    if wire != "ollama":
        entry["api_key"] = KEY
    return Settings(
        database_url=f"sqlite:///{tmp}/{wire}.db",
        default_model=MODELS[wire],
        providers={wire: entry},
        prices_file=None,
    )


def example(tmp: Path, name: str, model: str) -> Path:
    """An example team (with the knowledge it reads) whose ``model:`` is ``model``."""
    folder = tmp / f"examples-{model.replace(':', '-')}"
    if not folder.exists():
        shutil.copytree(REPO / "examples", folder)
    team = folder / "teams" / name
    text = team.read_text()
    if "\nmodel:" not in text:  # a team naming no model: the setting's default, made explicit
        text = text.replace("\npattern:", "\nmodel: offline\npattern:", 1)
    team.write_text(text.replace("model: offline", f"model: {model}"))
    return team


async def run(team: Team, request: str, **options: Any) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    async with team.runner() as runner:
        async for event in runner.stream(request, **options):
            events.append(event)
        result = await runner.result(events[0].run_id)
    return result, events


_OFFLINE: dict[str, tuple[RunResult, list[Event]]] = {}


async def offline(pattern: str, tmp_factory: pytest.TempPathFactory) -> tuple[RunResult, int]:
    """The pattern's example run offline (once per session): its result and model calls."""
    if pattern not in _OFFLINE:
        tmp = tmp_factory.mktemp(f"offline-{pattern}")
        name, request = PATTERNS[pattern]
        settings = Settings(database_url=f"sqlite:///{tmp}/offline.db")
        _OFFLINE[pattern] = await run(
            Team.from_yaml(example(tmp, name, "offline"), settings=settings), request
        )
    result, events = _OFFLINE[pattern]
    return result, sum(1 for e in events if e.type == "usage")


def shape(result: RunResult) -> list[tuple[str, str, str]]:
    return [(s.id, s.worker, s.status) for s in result.steps]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("wire", MODELS)
async def test_every_pattern_runs_over_every_wire_as_it_runs_offline(
    wire: str,
    streaming: bool,
    pattern: str,
    fake: FakeProvider,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    reference, calls = await offline(pattern, tmp_path_factory)
    name, request = PATTERNS[pattern]
    settings = on_wire(tmp_path, fake, wire, streaming=streaming)
    team = Team.from_yaml(example(tmp_path, name, MODELS[wire]), settings=settings)

    result, events = await run(team, request)

    assert fake.errors == []
    assert (result.status, result.error) == (reference.status, reference.error)
    assert shape(result) == shape(reference)
    assert result.output == reference.output  # every message and tool call went through intact
    # one request per model call, none retried; offline, the planner plans by the rules alone
    planned = sum(1 for e in events if e.type == "plan_created" and e.tier == "llm")
    assert len(fake.served) == calls + planned
    # usage is the provider's own count, priced by the table
    billed = fake.billed()
    assert (result.usage.input_tokens, result.usage.output_tokens) == billed
    assert result.usage.cost_usd == pytest.approx(PriceTable().cost(MODELS[wire], *billed))
    tokens = [e for e in events if e.type == "token"]
    texts = [  # replies in text (structured ones are values, not streamed)
        s.answer.text
        for s in fake.answered
        if s.answer is not None and s.answer.text and s.request.schema is None
    ]
    if streaming:  # tokens as they came: a reply in several pieces
        assert len(tokens) > len(texts)
    else:
        assert len(tokens) == len(texts)
    streams: dict[tuple[str, ...], str] = {}  # each agent's tokens, in order (calls in parallel
    for token in tokens:  # interleave with each other, not within one agent)
        key = (*token.path, token.parent_id or "", token.step_id or "")
        streams[key] = streams.get(key, "") + token.text
    assert all(any(text in stream for stream in streams.values()) for text in texts)
    assert sum(map(len, streams.values())) == sum(map(len, texts))


KINDS_TEAM = {
    "name": "desk",
    "knowledge": [str(REPO / "examples" / "knowledge")],
    "workflow": {"synthesizer": "llm"},
    "members": [
        {"name": "researcher", "kind": "react", "description": "researches the knowledge base"},
        {"name": "coder", "kind": "codeact", "tools": ["calculator"], "description": "computes"},
        {
            "name": "judge",
            "description": "gives a verdict",
            "output_schema": {
                "title": "Verdict",
                "type": "object",
                "properties": {"verdict": {"type": "string"}, "score": {"type": "integer"}},
                "required": ["verdict", "score"],
            },
        },
    ],
}
KINDS_PLAN = Plan(
    steps=[
        Step(id="facts", worker="researcher", task="Research MongoDB security"),
        Step(id="sum", worker="coder", task="Compute 20 + 22"),
        Step(id="verdict", worker="judge", task="Judge MongoDB security", depends_on=["facts"]),
    ]
)


@pytest.mark.parametrize("wire", MODELS)
async def test_react_codeact_structured_and_llm_synthesis_over_every_wire(
    wire: str, fake: FakeProvider, tmp_path: Path
) -> None:
    offline_team = Team.from_dict(
        {**KINDS_TEAM, "model": "offline"},
        settings=Settings(database_url=f"sqlite:///{tmp_path}/off.db"),
    )
    reference, _ = await run(offline_team, "Check MongoDB", plan=KINDS_PLAN)
    assert reference.status == "completed", reference.error
    settings = on_wire(tmp_path, fake, wire)
    team = Team.from_dict({**KINDS_TEAM, "model": MODELS[wire]}, settings=settings)

    result, _ = await run(team, "Check MongoDB", plan=KINDS_PLAN)

    assert fake.errors == [] and result.status == "completed", result.error
    assert [s.output for s in result.steps] == [s.output for s in reference.steps]
    assert result.output == reference.output  # the synthesizer's answer, from the model
    assert '"score"' in result.step("verdict").output  # the schema's value, validated


@pytest.mark.parametrize("wire", MODELS)
async def test_clarification_and_approval_over_every_wire(
    wire: str, fake: FakeProvider, tmp_path: Path
) -> None:
    settings = on_wire(tmp_path, fake, wire)
    team = Team.from_yaml(example(tmp_path, "notebook.yaml", MODELS[wire]), settings=settings)
    async with team.runner() as runner:
        asked = [e async for e in runner.stream("help")]
        assert asked[-1].type == "clarification_requested"
        run_id = asked[0].run_id
        answered = [
            e async for e in runner.resume_stream(run_id, answer="Save a note: Redis is fast")
        ]
        assert answered[-1].type == "approval_requested", [e.type for e in answered[-3:]]
        await runner.resume(run_id, default={"action": "approve"})
        result = await runner.result(run_id)
    assert fake.errors == [] and result.status == "completed", result.error
    calls = [e for e in answered if e.type == "tool_called"]
    assert [c.tool for c in calls][-1] == "save_note"
    assert (result.usage.input_tokens, result.usage.output_tokens) == fake.billed()


@pytest.mark.parametrize("wire", MODELS)
async def test_parallel_tool_calls_in_one_reply_all_run(
    wire: str, fake: FakeProvider, tmp_path: Path
) -> None:
    fake.script(
        Say(tool_calls=[
            {"name": "calculator", "args": {"expression": "6*7"}},
            {"name": "calculator", "args": {"expression": "2+2"}},
        ]),
        role="agent",
    )  # fmt: skip
    team = Team.from_dict(
        {"name": "t", "pattern": "single", "model": MODELS[wire],
         "members": [{"name": "calc", "description": "computes", "tools": ["calculator"]}]},
        settings=on_wire(tmp_path, fake, wire),
    )  # fmt: skip
    result, events = await run(team, "Compute 6*7 and 2+2")
    assert fake.errors == [] and result.status == "completed", result.error
    returned = [e.output for e in events if e.type == "tool_returned"]
    assert ["42" in r for r in returned] == [True, False] and "4" in returned[1]
    followup = fake.answered[-1].request.messages  # both results went back to the model
    assert sum(1 for m in followup if m.type == "tool") == 2


@pytest.mark.parametrize("wire", MODELS)
async def test_a_reply_cut_by_the_length_limit_is_kept_and_says_so(
    wire: str, fake: FakeProvider, tmp_path: Path
) -> None:
    fake.script(Say(text="PostgreSQL is a relational data", finish="length"))
    team = Team.from_dict(
        {
            "name": "t",
            "pattern": "single",
            "model": MODELS[wire],
            "members": [{"name": "a", "description": "any"}],
        },
        settings=on_wire(tmp_path, fake, wire),
    )
    result, events = await run(team, "Describe PostgreSQL")
    assert result.status == "completed" and result.output == "PostgreSQL is a relational data"
    assert [e.stop_reason for e in events if e.type == "usage"] == ["length"]


@pytest.mark.parametrize(
    ("wire", "streaming"), [("openai", False), ("anthropic", True), ("anthropic", False)]
)
async def test_a_refusal_fails_the_step_with_the_models_words(
    wire: str, streaming: bool, fake: FakeProvider, tmp_path: Path
) -> None:
    fake.script(Refuse("I can't help with that."))
    team = Team.from_dict(
        {"name": "t", "model": MODELS[wire], "members": [{"name": "a", "description": "any"}]},
        settings=on_wire(tmp_path, fake, wire, streaming=streaming),
    )
    result, _ = await run(team, "x", plan=Plan(steps=[Step(id="s", worker="a", task="x")]))
    error = result.step("s").error
    assert result.step("s").status == "failed" and "declined to answer" in error
    assert len(fake.served) == 1  # a refusal is not retried
    if wire == "openai":
        assert "I can't help with that." in error


async def test_a_streamed_openai_refusal_arrives_empty_and_fails_the_step(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """langchain-openai drops streamed refusal text: the reply is empty; asked once more, an
    empty reply again fails the step (not an empty answer)."""
    fake.script(Refuse(), Refuse())
    team = Team.from_dict(
        {"name": "t", "model": MODELS["openai"], "members": [{"name": "a", "description": "any"}]},
        settings=on_wire(tmp_path, fake, "openai"),
    )
    result, _ = await run(team, "x", plan=Plan(steps=[Step(id="s", worker="a", task="x")]))
    assert result.step("s").status == "failed" and "empty reply" in result.step("s").error
