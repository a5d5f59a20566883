"""The workspace's front-end logic (ES modules under ``teamgraph/ui/static/js``) run in the
browser against real event streams: event → view state, graph layout, SSE parsing, markdown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from teamgraph.config import Settings
from teamgraph.runtime.team_api import Team
from tests.ui.conftest import REPO, Server

TEAMS = REPO / "examples" / "teams"


@pytest.fixture(scope="module")
def js(browser: Any, server: Server) -> Iterator[Any]:
    """``js(module, expression, arg)``: evaluate ``expression`` (a function of the module and
    ``arg``) in a page of the server, with the module imported from ``/ui/js/``."""
    context = browser.new_context(base_url=server.url, bypass_csp=True)
    page = context.new_page()
    page.goto("/")  # an HTML document of the server's origin (the app shows its login)

    def call(module: str, expression: str, arg: Any = None) -> Any:
        script = (
            f"async (arg) => {{ const m = await import('/ui/js/{module}');"
            f" return ({expression})(m, arg); }}"
        )
        return page.evaluate(script, arg)

    yield call
    context.close()


def _events(team_file: str, request: str, tmp: Path) -> list[dict[str, Any]]:
    settings = Settings(database_url=f"sqlite:///{tmp}/events.db", knowledge_path=tmp / "k.db")
    team = Team.from_yaml(TEAMS / team_file, settings=settings)

    async def collect() -> list[dict[str, Any]]:
        return [e.model_dump(mode="json") async for e in team.stream(request)]

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API owns this thread's loop
        return pool.submit(asyncio.run, collect()).result()


@pytest.fixture(scope="module")
def research(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("research")
    return _events("research.yaml", "Compare PostgreSQL and MongoDB on performance and cost", tmp)


def fold(js: Any, events: list[dict[str, Any]], count: int | None = None) -> dict[str, Any]:
    chosen = events if count is None else events[:count]
    state: dict[str, Any] = js(
        "runstate.js",
        "(m, events) => { const s = m.replay(events);"
        " return JSON.parse(JSON.stringify({...s, plan: m.rootPlan(s), nested: m.nestedTeams(s),"
        " live: m.liveText(s)})); }",
        chosen,
    )
    return state


def test_a_whole_workflow_run_folds_into_its_result(js: Any, research: list[dict]) -> None:
    state = fold(js, research)
    end = research[-1]
    assert end["type"] == "run_completed" and state["status"] == end["status"]
    assert state["output"] == end["output"] and state["lastSeq"] == end["seq"]
    completed = {e["step_id"]: e for e in research if e["type"] == "step_completed"}
    plan = next(e for e in research if e["type"] == "plan_created")
    assert [s["id"] for s in state["plan"]] == [s["id"] for s in plan["steps"]]
    for step in state["plan"]:
        assert step["state"] == "done"
        assert step["output"] == completed[step["id"]]["output"]  # its own output, not another's
        assert step["elapsed"] == completed[step["id"]]["elapsed_s"]
    summary = state["plan"][-1]
    assert summary["dependsOn"] == [s["id"] for s in plan["steps"][:-1]]
    assert state["planner"]["tier"] == plan["tier"] == "rules"
    assert state["planner"]["confidence"] == plan["confidence"]
    total = end["usage"]
    assert state["usage"]["input_tokens"] == total["input_tokens"]
    assert state["usage"]["output_tokens"] == total["output_tokens"]
    by_agent = sum(a["usage"]["input_tokens"] for a in state["agents"].values())
    assert by_agent == total["input_tokens"]
    step_tokens = {e["step_id"]: 0 for e in research if e["type"] == "step_started"}
    for e in research:
        if e["type"] == "usage" and e["step_id"]:
            step_tokens[e["step_id"]] += e["usage"]["input_tokens"] + e["usage"]["output_tokens"]
    for step in state["plan"]:
        tokens = step["usage"]["input_tokens"] + step["usage"]["output_tokens"]
        assert tokens == step_tokens[step["id"]] > 0
    calls = [e for e in research if e["type"] == "tool_called"]
    assert len(state["tools"]) == len(calls) > 0
    assert all(t["state"] == "done" and t["output"] and t["stepKey"] for t in state["tools"])


def test_a_replay_position_shows_the_run_as_it_was_then(js: Any, research: list[dict]) -> None:
    first_done = next(i for i, e in enumerate(research) if e["type"] == "step_completed")
    state = fold(js, research, first_done + 1)
    finished = research[first_done]["step_id"]
    states = {s["id"]: s["state"] for s in state["plan"]}
    assert states[finished] == "done" and states["summary"] == "pending"
    started = {e["step_id"] for e in research[: first_done + 1] if e["type"] == "step_started"}
    assert {k for k, v in states.items() if v == "running"} == started - {finished}
    assert state["status"] == "running" and state["output"] == ""
    before_plan = next(i for i, e in enumerate(research) if e["type"] == "plan_created")
    planning = fold(js, research, before_plan)
    assert planning["plan"] == [] and planning["live"] is None  # the planner's JSON is no answer


def test_replayed_duplicates_change_nothing(js: Any, research: list[dict]) -> None:
    once = fold(js, research)
    twice = fold(js, research + research[len(research) // 2 :])
    assert twice == once


def test_nested_teams_become_groups_and_charge_their_parent_step(
    js: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("nested")
    events = _events("hierarchical.yaml", "Compare PostgreSQL and MongoDB on security", tmp)
    state = fold(js, events)
    root_steps = {s["id"]: s for s in state["plan"]}
    assert set(root_steps) and all(s["state"] == "done" for s in root_steps.values())
    groups = {tuple(t["path"]): t for t in state["nested"]}
    assert set(groups) == {("newsroom", "research_desk"), ("newsroom", "editorial_desk")}
    for path, team in groups.items():
        parent = root_steps[team["parentStep"].split("#")[-1]]
        assert parent["worker"] == path[-1] and parent["child"] == team["key"]
        spent = sum(
            e["usage"]["input_tokens"] + e["usage"]["output_tokens"]
            for e in events
            if e["type"] == "usage" and tuple(e["path"][:2]) == path
        )
        assert parent["usage"]["input_tokens"] + parent["usage"]["output_tokens"] == spent > 0
    tree = state["tree"]["children"]
    assert (
        tree["research_desk"]["kind"] == "team"
        and "researcher" in tree["research_desk"]["children"]
    )


def test_handoffs_move_control_and_leave_a_trail(
    js: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("swarm")
    events = _events("swarm.yaml", "How does PostgreSQL handle MVCC?", tmp)
    handoffs = [e for e in events if e["type"] == "handoff"]
    assert handoffs
    state = fold(js, events)
    assert state["control"]["holder"] == handoffs[-1]["to_agent"]
    assert [(t["from"], t["to"]) for t in state["control"]["trail"]] == [
        (h["from_agent"], h["to_agent"]) for h in handoffs
    ]
    before = fold(js, events, events.index(handoffs[0]))
    assert before["control"]["holder"] == handoffs[0]["from_agent"]


def test_the_plan_is_laid_out_in_layers_by_depth(js: Any) -> None:
    steps = [
        {"id": "a", "dependsOn": []},
        {"id": "b", "dependsOn": ["a"]},
        {"id": "c", "dependsOn": ["a"]},
        {"id": "d", "dependsOn": ["b", "c"]},
        {"id": "e", "dependsOn": []},
        {"id": "f", "dependsOn": ["d", "e", "missing"]},
    ]
    layout = js("layout.js", "(m, steps) => m.layoutPlan(steps)", steps)
    assert layout["layers"] == [["a", "e"], ["b", "c"], ["d"], ["f"]]
    assert {(e["from"], e["to"]) for e in layout["edges"]} == {
        ("a", "b"),
        ("a", "c"),
        ("b", "d"),
        ("c", "d"),
        ("d", "f"),
        ("e", "f"),
    }
    nodes = layout["nodes"]
    assert nodes["b"]["y"] > nodes["a"]["y"] and nodes["b"]["y"] == nodes["c"]["y"]
    assert nodes["b"]["x"] != nodes["c"]["x"]


def test_sse_is_parsed_the_same_however_the_bytes_arrive(js: Any) -> None:
    stream = (
        ': ping\r\n\r\nid: 1\r\nevent: run_started\r\ndata: {"seq": 1}\r\n\r\n'
        "id: 2\nevent: token\ndata: line one\ndata: line two\n\n"
    )
    expected = [
        {"id": "1", "event": "run_started", "data": '{"seq": 1}'},
        {"id": "2", "event": "token", "data": "line one\nline two"},
    ]
    for size in (1, 3, 7, len(stream)):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        parsed = js(
            "sse.js",
            "(m, chunks) => { const p = new m.SSEParser();"
            " return chunks.flatMap((c) => p.feed(c)); }",
            chunks,
        )
        assert parsed == expected, size


def test_markdown_renders_structure_and_never_markup_from_content(js: Any) -> None:
    source = "\n".join(
        [
            "# Title",
            "Some **bold** and `code` and [a link](https://example.com/x).",
            "",
            "- one",
            "- <img src=x onerror=alert(1)>",
            "",
            "<script>alert(2)</script>",
            "[evil](javascript:alert(3)) and [data](data:text/html,hi)",
            "```",
            "<b>not bold</b>",
            "```",
            "| a | b |",
            "|---|---|",
            "| <i>x</i> | 2 |",
        ]
    )
    result = js(
        "markdown.js",
        "(m, src) => { const div = document.createElement('div');"
        " div.append(m.renderMarkdown(src));"
        " return { tags: [...div.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),"
        " links: [...div.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.rel]),"
        " text: div.textContent }; }",
        source,
    )
    assert set(result["tags"]) <= {
        "h1",
        "p",
        "strong",
        "code",
        "a",
        "ul",
        "li",
        "pre",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
    }
    assert result["links"] == [["https://example.com/x", "noopener noreferrer nofollow"]]
    for literal in (
        "<img src=x onerror=alert(1)>",
        "<script>alert(2)</script>",
        "[evil](javascript:alert(3))",
        "<b>not bold</b>",
        "<i>x</i>",
    ):
        assert literal in result["text"]
    assert json.dumps(result["tags"]).count('"li"') == 2


def test_the_vocabulary_is_the_servers(js: Any) -> None:
    from teamgraph import status

    vocab = js("vocab.js", "(m) => ({...m})")
    for name in ("OPEN", "FINISHED", "PAUSED", "STOPPED"):
        assert set(vocab[name]) == set(getattr(status, name)), name
    assert vocab["END_EVENTS"] == list(status.END_EVENTS)
    assert vocab["PAUSE_EVENTS"] == list(status.PAUSE_EVENTS)


def python_view(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The CLI's fold of the same events, in the shape both folds share."""
    from teamgraph.events import event_from_json
    from teamgraph.runtime.view import RunView

    view = RunView()
    for event in events:
        view.apply(event_from_json(json.dumps(event)))
    return {
        "status": view.status,
        "output": view.output,
        "tier": view.tier or None,
        "steps": [(s.id, s.state, s.tokens) for s in view.steps.values()],
        "tokens": view.usage.total_tokens,
    }


def js_view(state: dict[str, Any]) -> dict[str, Any]:
    usage = state["usage"]
    return {
        "status": state["status"],
        "output": state["output"],
        "tier": (state["planner"] or {}).get("tier"),
        "steps": [
            (s["id"], s["state"], s["usage"]["input_tokens"] + s["usage"]["output_tokens"])
            for s in state["plan"]
        ],
        "tokens": usage["input_tokens"] + usage["output_tokens"],
    }


@pytest.mark.parametrize(
    ("team_file", "request_text"),
    [
        ("research.yaml", "Compare PostgreSQL and MongoDB on performance and cost"),
        ("hierarchical.yaml", "Compare PostgreSQL and MongoDB on security"),
        ("swarm.yaml", "How does PostgreSQL handle MVCC?"),
        ("notebook.yaml", "help"),
    ],
)
def test_the_python_and_js_folds_agree(
    js: Any, tmp_path_factory: pytest.TempPathFactory, team_file: str, request_text: str
) -> None:
    events = _events(team_file, request_text, tmp_path_factory.mktemp("parity"))
    for count in sorted({len(events) // 3, len(events) // 2, len(events)}):
        assert python_view(events[:count]) == js_view(fold(js, events, count)), count


def test_the_folds_agree_on_a_failed_and_a_cancelled_run(js: Any) -> None:
    start = _event(1, "run_started", ["t"], team="t", pattern="single", input="go", thread_id="r")
    for end in (
        _event(2, "run_failed", ["t"], error="TimeoutError: the model did not answer"),
        _event(2, "run_cancelled", ["t"], reason="cancelled"),
    ):
        assert python_view([start, end]) == js_view(fold(js, [start, end]))


def _event(seq: int, kind: str, path: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "run_id": "r",
        "seq": seq,
        "ts": f"2026-01-01T00:00:{seq:02d}Z",
        "path": path,
        "parent_id": None,
        "type": kind,
        **fields,
    }


def test_failures_skips_costs_and_pauses_are_shown_as_they_happened(js: Any) -> None:
    steps = [
        {"id": "fetch", "worker": "researcher", "task": "Fetch", "depends_on": []},
        {"id": "check", "worker": "critic", "task": "Check", "depends_on": []},
        {"id": "report", "worker": "writer", "task": "Report", "depends_on": ["fetch", "check"]},
    ]
    usage = {"input_tokens": 1000, "output_tokens": 500, "cost_usd": 0.0125}
    events = [
        _event(1, "run_started", ["t"], team="t", pattern="workflow", input="go", thread_id="r"),
        _event(2, "plan_created", ["t"], plan_name="p", tier="rules", confidence=0.5, steps=steps),
        _event(
            3,
            "step_started",
            ["t", "researcher"],
            step_id="fetch",
            worker="researcher",
            task="Fetch",
        ),
        _event(4, "step_started", ["t", "critic"], step_id="check", worker="critic", task="Check"),
        _event(
            5,
            "usage",
            ["t", "critic"],
            agent="critic",
            model="openai:gpt-4o-mini",
            usage=usage,
            step_id="check",
        ),
        _event(
            6,
            "step_completed",
            ["t", "critic"],
            step_id="check",
            worker="critic",
            output="all good",
            elapsed_s=1.5,
            usage=usage,
        ),
        _event(
            7,
            "approval_requested",
            ["t", "researcher"],
            agent="researcher",
            tool="drop",
            call_id="c1",
            args={"table": "x"},
            request_id="q1",
            step_id="fetch",
        ),
    ]
    call = _event(
        7,
        "tool_called",
        ["t", "researcher", "drop"],
        agent="researcher",
        tool="drop",
        call_id="c1",
        args={"table": "x"},
        step_id="fetch",
    )
    paused = fold(js, [*events[:6], call, {**events[6], "seq": 8}])
    assert paused["status"] == "interrupted"
    assert [t["state"] for t in paused["tools"]] == ["approval"]
    assert paused["pending"]["approvals"][0]["requestId"] == "q1"
    resumed = [
        _event(8, "resumed", ["t"], completed_steps=["check"]),
        _event(
            9,
            "step_failed",
            ["t", "researcher"],
            step_id="fetch",
            worker="researcher",
            error="TimeoutError: upstream",
            elapsed_s=2.0,
        ),
        _event(
            10,
            "step_skipped",
            ["t", "writer"],
            step_id="report",
            worker="writer",
            reason="dependency fetch failed",
        ),
        _event(
            11,
            "run_completed",
            ["t"],
            status="completed_with_errors",
            output="partial",
            usage=usage,
        ),
    ]
    state = fold(js, events + resumed)
    by_id = {s["id"]: s for s in state["plan"]}
    assert state["pending"] == {"clarification": None, "approvals": []}
    assert (by_id["fetch"]["state"], by_id["fetch"]["error"]) == (
        "failed",
        "TimeoutError: upstream",
    )
    assert (by_id["report"]["state"], by_id["report"]["reason"]) == (
        "skipped",
        "dependency fetch failed",
    )
    assert by_id["check"]["usage"] == usage and state["usage"] == usage
    assert state["agents"]["critic"]["usage"]["cost_usd"] == 0.0125
    assert state["status"] == "completed_with_errors"
    context = js(
        "runstate.js",
        "(m, events) => { const s = m.replay(events);"
        " return m.contextOf(s, m.rootPlan(s).find((x) => x.id === 'report')); }",
        events + resumed,
    )
    assert context == "### check\nall good"  # only finished dependencies, labelled by id


def test_a_retried_model_call_drops_the_failed_attempts_tokens(js: Any) -> None:
    def event(seq: int, type_: str, **fields: Any) -> dict[str, Any]:
        path = ["t", "writer"]
        return {
            "run_id": "r",
            "seq": seq,
            "ts": "",
            "path": path,
            "parent_id": None,
            "type": type_,
            "agent": "writer",
            "step_id": "s",
            **fields,
        }

    usage = {"input_tokens": 3, "output_tokens": 2, "cost_usd": 0.0}
    events = [
        event(1, "token", text="First call. "),
        event(2, "usage", model="m", usage=usage, stop_reason="stop"),
        event(3, "token", text="half an ans"),  # the connection drops here
        event(4, "model_retry", model="m", attempt=1, delay_s=0.5, error="ReadError"),
        event(5, "token", text="A whole answer."),
    ]
    texts = js(
        "runstate.js",
        "(m, events) => Object.values(m.replay(events).streams).map((s) => s.text)",
        events,
    )
    assert texts == ["First call. A whole answer."]


def test_errors_name_runs_by_their_short_id(js: Any) -> None:
    """A server's error names a run by its 32-character id; the workspace shows the 12-character
    form the CLI shows and accepts (a longer hex string is left alone)."""
    run_id = "3e70dcb26ed94f0aa1b2c3d4e5f60718"
    message = js(
        "api.js",
        "(m, id) => new m.ApiError(409, `run ${id} of this session is paused: resume it`).message",
        run_id,
    )
    assert message == "run 3e70dcb26ed9 of this session is paused: resume it"
    assert js("dom.js", "(m, s) => m.shortIds(s)", "a" * 40) == "a" * 40
