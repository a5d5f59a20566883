"""Rule-based planning: routing, decomposition rules and plan templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamgraph.errors import PlanValidationError, SpecError
from teamgraph.plan import plan_errors
from teamgraph.planning.request_structure import parse_comparison
from teamgraph.planning.routing import WorkerInfo, overlap_score, route, routing
from teamgraph.planning.rules import decompose, plan_by_rules
from teamgraph.planning.templates import (
    BUILTIN_TEMPLATES_DIR,
    Template,
    instantiate,
    load_templates,
    ranked,
)
from teamgraph.specs.builtin import BUILTIN_WORKERS
from teamgraph.text import tokenize

WORKERS = [WorkerInfo(spec.name, spec.description) for spec in BUILTIN_WORKERS.values()]
NAMES = [w.name for w in WORKERS]


# --- routing ---------------------------------------------------------------------------------
def test_tokenize_english_and_chinese() -> None:
    assert tokenize("数据库安全") == ["数据", "据库", "库安", "安全"]
    assert tokenize("The databases and the database") == ["databas", "databas"]
    assert tokenize("Debugging, writes, summaries") == ["debug", "writ", "summary"]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Look up the history of the Roman empire", "researcher"),
        ("Fix the bug in my sorting function", "coder"),
        ("Calculate the ROI and evaluate the options", "analyst"),
        ("Summarize the meeting notes", "writer"),
        ("Check the report for errors", "critic"),
        ("调研数据库安全", "researcher"),
        ("分析销售数据", "analyst"),
        ("撰写总结报告", "writer"),
        ("写一段代码实现快速排序", "coder"),
        ("审查这篇文章", "critic"),
    ],
)
def test_route_builtin_workers(task: str, expected: str) -> None:
    assert route(task, WORKERS) == expected


def test_route_custom_workers_by_their_own_descriptions() -> None:
    workers = [
        WorkerInfo("dba", "Database administrator: tunes SQL queries, indexes and schemas."),
        WorkerInfo("designer", "UI designer: creates layouts, colour palettes and mockups."),
        WorkerInfo("translator", "翻译专家：把中文翻译成英文"),
        WorkerInfo("scout", "Web scout: searches the internet and gathers sources."),
    ]
    assert route("Tune the slow SQL query and its indexes", workers) == "dba"
    assert route("Create a mockup of the login layout", workers) == "designer"
    assert route("请把这段话翻译成英文", workers) == "translator"
    # no shared word: "research" reaches the scout only through the synonym table
    assert route("Research the history of Rust", workers) == "scout"


PUBLISHING = [
    WorkerInfo("drafter", "Drafts blog posts, articles, essays and emails from notes."),
    WorkerInfo("editor", "Reviews drafts: clarity, tone and grammar; marks mistakes."),
    WorkerInfo("translator", "Translates text between English and Chinese."),
]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Review my essay on climate change", "editor"),  # the verb, not the topic, decides
        ("Reviewing this blog post, please", "editor"),
        ("Write an essay about remote work", "drafter"),
        ("Translate this paragraph into Chinese", "translator"),
        ("請幫我檢查這篇文章", "editor"),  # traditional characters meet a simplified synonym
    ],
)
def test_routing_does_not_depend_on_member_order(task: str, expected: str) -> None:
    for members in (PUBLISHING, PUBLISHING[::-1], PUBLISHING[1:] + PUBLISHING[:1]):
        routed = routing(task, members)
        assert (routed.worker, routed.clear) == (expected, True), members


def test_agent_nouns_meet_their_verbs() -> None:
    workers = [WorkerInfo("reviewer", "Senior engineer."), WorkerInfo("tester", "QA engineer.")]
    assert route("review the pull request", workers) == "reviewer"
    assert route("test the login page", workers) == "tester"


def test_a_question_is_a_look_up() -> None:
    assert route("How does Redis persist data to disk?", WORKERS) == "researcher"
    assert route("Redis 点样将数据写入磁盘？", WORKERS) == "researcher"


def test_route_ties_default_and_fallback() -> None:
    twins = [WorkerInfo("a", "writes reports"), WorkerInfo("b", "writes reports")]
    assert route("write a report", twins) == "a"
    assert route("xyzzy", twins, default="b") == "b"
    assert route("xyzzy", twins, default="not-a-worker") == "a"
    assert route("xyzzy", twins) == "a"
    with pytest.raises(ValueError):
        route("anything", [])


def test_overlap_score_direct_beats_synonym() -> None:
    assert overlap_score("search documents", "searches documents") == 2.0
    assert 0 < overlap_score("research", "searches documents") < 0.5
    assert overlap_score("bake a cake", "searches documents") == 0.0


# --- decomposition rules ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_text",
    [
        "Compare PostgreSQL and MongoDB on performance, security and cost",
        "PostgreSQL vs MongoDB: performance, security, cost",
    ],
)
def test_comparison_with_aspects(request_text: str) -> None:
    plan = decompose(request_text, WORKERS)
    assert plan_errors(plan, NAMES) == []
    assert plan.entities == ["PostgreSQL", "MongoDB"]
    assert plan.name == "Compare PostgreSQL and MongoDB"
    assert plan.confidence == 0.8
    assert "Comparison rule" in plan.reasoning
    ids = [s.id for s in plan.steps]
    assert ids == ["research_performance", "research_security", "research_cost", "summary"]
    assert plan.step("research_performance").task == (
        "Research performance of PostgreSQL and MongoDB: find facts about each and how they differ."
    )
    assert {plan.step(i).worker for i in ids[:3]} == {"researcher"}
    summary = plan.step("summary")
    assert summary.worker == "writer"
    assert summary.depends_on == ids[:3]
    assert summary.task.startswith("Write a summary comparing PostgreSQL and MongoDB")


def test_chinese_comparison() -> None:
    plan = decompose("比较 PostgreSQL 和 MongoDB 的性能、安全和成本", WORKERS)
    assert plan_errors(plan, NAMES) == []
    assert plan.entities == ["PostgreSQL", "MongoDB"]
    assert [s.id for s in plan.steps] == ["aspect_1", "aspect_2", "aspect_3", "summary"]
    assert "性能" in plan.step("aspect_1").task
    assert "成本" in plan.step("aspect_3").task
    assert plan.step("aspect_1").worker == "researcher"
    assert plan.step("summary").worker == "writer"
    assert plan.step("summary").depends_on == ["aspect_1", "aspect_2", "aspect_3"]


def test_comparison_without_aspects() -> None:
    plan = decompose("compare Redis and Memcached", WORKERS)
    assert plan_errors(plan, NAMES) == []
    assert plan.entities == ["Redis", "Memcached"]
    assert [s.id for s in plan.steps] == ["research_redis", "research_memcached", "compare"]
    assert plan.step("research_redis").worker == "researcher"
    assert plan.step("compare").worker == "analyst"
    assert plan.step("compare").depends_on == ["research_redis", "research_memcached"]


@pytest.mark.parametrize(
    ("request_text", "entities", "aspects"),
    [
        ("Compare Microsoft, Google and Amazon this year", ["Microsoft", "Google", "Amazon"], []),
        ("AWS vs Azure vs GCP for startups", ["AWS", "Azure", "GCP"], []),
        ("Which is cheaper for a startup, AWS or GCP?", ["AWS", "GCP"], []),
        ("Should I use Kafka or RabbitMQ?", ["Kafka", "RabbitMQ"], []),
        ("How does Rust compare to Go on memory safety?", ["Rust", "Go"], ["memory safety"]),
        ("What are the pros and cons of Rust vs Go for CLI tools?", ["Rust", "Go"], []),
        ("比较比亚迪和特斯拉最近的销量并分析原因", ["比亚迪", "特斯拉"], ["销量"]),
        ("比較台北和東京的住宿費用", ["台北", "東京"], ["住宿費用"]),  # as written: traditional
        ("幫我比較一下PostgreSQL同MySQL喺性能方面有咩分別", ["PostgreSQL", "MySQL"], ["性能"]),
        ("Python同Go有咩分別？", ["Python", "Go"], []),
    ],
)
def test_comparison_entities_and_aspects_as_written(
    request_text: str, entities: list[str], aspects: list[str]
) -> None:
    parsed = parse_comparison(request_text)
    assert parsed is not None
    assert (list(parsed.entities), list(parsed.aspects)) == (entities, aspects)


@pytest.mark.parametrize(
    "request_text",
    ["How do I connect Python to PostgreSQL?", "Tell me about the history of Rome and Athens"],
)
def test_two_names_are_not_a_comparison(request_text: str) -> None:
    assert parse_comparison(request_text) is None


def test_rules_tier_order_strong_template_then_routing_then_weak_template() -> None:
    templates = load_templates([BUILTIN_TEMPLATES_DIR])
    strong = plan_by_rules("Please review this Python code for bugs", WORKERS, None, templates)
    assert (strong.tier, strong.plan.name) == ("template", "code_review")
    # one generic keyword ("code") does not outrank a clear route
    routed = plan_by_rules("Write code that parses a CSV file", WORKERS, None, templates)
    assert (routed.tier, [s.worker for s in routed.plan.steps]) == ("rules", ["coder"])
    nothing = plan_by_rules("Bonjour tout le monde", WORKERS, "writer", templates)
    assert (nothing.tier, [s.worker for s in nothing.plan.steps]) == ("fallback", ["writer"])
    assert nothing.notes


def test_a_template_the_team_cannot_run_is_passed_over_silently() -> None:
    # Nobody named it: a note would only tell the user about a template they never asked for
    # (an explicit --template the team cannot run is noted: tests/test_workflow.py).
    templates = load_templates([BUILTIN_TEMPLATES_DIR])
    team = [w for w in WORKERS if w.name != "critic"]  # code_review needs the critic
    ruled = plan_by_rules("Please review this Python code for bugs", team, None, templates)
    assert ruled.plan.name != "code_review"
    assert not any("code_review" in note for note in ruled.notes)


def test_english_chain_first_then_finally() -> None:
    plan = decompose(
        "First research the EV market, then analyze the competitors, and finally write a report",
        WORKERS,
    )
    assert plan_errors(plan, NAMES) == []
    assert plan.confidence == 0.7
    assert [(s.id, s.worker, s.depends_on) for s in plan.steps] == [
        ("step_1", "researcher", []),
        ("step_2", "analyst", ["step_1"]),
        ("step_3", "writer", ["step_2"]),
    ]
    assert plan.step("step_1").task == "research the EV market"


@pytest.mark.parametrize(
    ("request_text", "tasks"),
    [
        ("首先调研市场，然后分析竞争对手", ["调研市场", "分析竞争对手"]),
        ("首先调研市场，然后分析竞争对手，最后撰写报告", ["调研市场", "分析竞争对手", "撰写报告"]),
        ("先调研市场，再写报告", ["调研市场", "写报告"]),
        ("先调研市场再写报告", ["调研市场", "写报告"]),  # "先…再…" with no comma
        ("一、调研市场；二、写报告", ["调研市场", "写报告"]),
        ("Research the market. Second, write a report.", ["Research the market", "write a report"]),
        ("Research the market; once that is done, write a report", None),
        ("Write a report on the market and have it proofread", None),  # the work on its result
        ("写完报告后再检查一遍", ["写完报告", "检查一遍"]),
        ("分析数据并且写报告", ["分析数据", "写报告"]),
        ("1. Research the market 2. Analyze competitors 3. Write a plan", None),
    ],
)
def test_chains(request_text: str, tasks: list[str] | None) -> None:
    plan = decompose(request_text, WORKERS)
    assert plan_errors(plan, NAMES) == []
    if tasks is not None:
        assert [s.task for s in plan.steps] == tasks
    else:
        assert len(plan.steps) >= 2
    for previous, step in zip(plan.steps, plan.steps[1:], strict=False):
        assert step.depends_on == [previous.id]


def test_a_step_checking_the_one_before_goes_to_another_worker() -> None:
    """The coder writes and can review code, yet "then review it" is a second pair of eyes."""
    plan = decompose("Implement the sorting function, then review it for bugs", WORKERS)
    assert [s.worker for s in plan.steps] == ["coder", "critic"]


def test_fallback_is_one_low_confidence_step() -> None:
    plan = decompose("Bonjour tout le monde", WORKERS, default="writer")
    assert plan_errors(plan, NAMES) == []
    assert len(plan.steps) == 1
    assert plan.steps[0].task == "Bonjour tout le monde"
    assert plan.steps[0].worker == "writer"  # no overlap with any description -> default
    assert plan.confidence < 0.4
    assert "No decomposition rule matched" in plan.reasoning


def test_a_clearly_routed_single_step_is_a_confident_plan() -> None:
    plan = decompose("What is the capital of France?", WORKERS, default="writer")
    assert [s.worker for s in plan.steps] == ["researcher"]  # a question asks to look up
    assert plan.confidence == 0.6 and "fits the request best" in plan.reasoning


def test_max_steps_cap_keeps_plan_valid_and_summary() -> None:
    aspects = ", ".join(f"aspect{i}" for i in range(12))
    plan = decompose(f"Compare A and B on {aspects}", WORKERS, max_steps=4)
    assert plan_errors(plan, NAMES, max_steps=4) == []
    assert len(plan.steps) == 4
    assert plan.steps[-1].id == "summary"
    assert "aspect11" in plan.steps[-2].task  # merged into the last research step
    chain = decompose("1. a x 2. b x 3. c x 4. d x 5. e x", WORKERS, max_steps=2)
    assert plan_errors(chain, NAMES, max_steps=2) == []
    assert len(chain.steps) == 2
    single = decompose("compare A and B", WORKERS, max_steps=1)
    assert plan_errors(single, NAMES, max_steps=1) == []


def test_plans_use_only_existing_workers() -> None:
    only = [WorkerInfo("solo", "Does everything.")]
    for text in ["Compare A and B on cost", "First do x, then do y", "hello"]:
        assert plan_errors(decompose(text, only), ["solo"]) == []


# --- templates -------------------------------------------------------------------------------
def test_builtin_templates_load_and_fit_builtin_workers() -> None:
    templates = load_templates([BUILTIN_TEMPLATES_DIR])
    expected = {"code_review", "research_report", "data_pipeline", "parallel_comparison"}
    assert set(templates) == expected
    for template in templates.values():
        plan = instantiate(template, "anything", BUILTIN_WORKERS)
        assert plan_errors(plan, NAMES) == []
    review = instantiate(templates["code_review"], "x")
    assert set(review.step("summary").depends_on) == {"find_bugs", "style_review"}


def test_later_dirs_override_earlier(tmp_path: Path) -> None:
    (tmp_path / "mine.yml").write_text(
        "name: code_review\ndescription: mine\nsteps:\n  - {id: a, worker: coder, task: t}\n",
        encoding="utf-8",
    )
    templates = load_templates([BUILTIN_TEMPLATES_DIR, tmp_path])
    assert templates["code_review"].description == "mine"
    assert len(templates) == 4


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ("name: t\nsteps:\n  - {id: a, worker: coder, task: x, priority: 5}\n", ["priority", "5"]),
        ("name: t\nmatch:\n  regex: ['(oops']\nsteps:\n  - {id: a, worker: coder, task: x}\n",
         ["match.regex", "(oops"]),
        ("name: t\nsteps:\n  - {id: a, worker: coder, task: x, depends_on: [zzz]}\n",
         ["steps", "zzz"]),
        ("name: 'bad name!'\nsteps:\n  - {id: a, worker: coder, task: x}\n", ["name", "bad name!"]),
        ("name: [unclosed\n", ["not valid YAML"]),
    ],
)  # fmt: skip
def test_bad_template_file_names_file_field_value(
    tmp_path: Path, body: str, fragments: list[str]
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_templates([tmp_path])
    message = str(info.value)
    assert "broken.yaml" in message
    for fragment in fragments:
        assert fragment in message


def test_missing_templates_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_templates([tmp_path / "nope"])


def test_instantiate_appends_request_and_is_brace_safe() -> None:
    template = Template.model_validate(
        {
            "name": "demo",
            "description": "a demo",
            "steps": [
                {"id": "a", "worker": "coder", "task": "Do {request} now"},
                {"id": "b", "worker": "writer", "task": "Report", "depends_on": ["a"]},
            ],
        }
    )
    request = "parse {json} and {0} {request}"
    plan = instantiate(template, request)
    suffix = f"\n\nUser's original request: {request}"
    assert all(step.task.endswith(suffix) for step in plan.steps)
    assert plan.step("a").task == f"Do {request} now{suffix}"
    assert plan.step("b").task == f"Report{suffix}"
    assert plan.name == "demo"
    assert plan.confidence == 1.0
    assert "demo" in plan.reasoning
    with pytest.raises(PlanValidationError):
        instantiate(template, request, workers=["coder"])


def best(request: str, templates: dict[str, Template]) -> Template | None:
    found = ranked(request, templates)
    return found[0][1] if found else None


def test_ranked_templates() -> None:
    templates = load_templates([BUILTIN_TEMPLATES_DIR])
    matched = best("Please review this Python code for bugs", templates)
    assert matched is not None and matched.name == "code_review"
    research = best("Research quantum computing and write a report", templates)
    assert research is not None and research.name == "research_report"
    chinese = best("请审查这段代码", templates)
    assert chinese is not None and chinese.name == "code_review"
    assert ranked("What's the weather in Paris tomorrow?", templates) == []


def test_ranked_templates_prefer_regex_then_alphabetical() -> None:
    def make(name: str, keywords: list[str], regex: list[str]) -> Template:
        return Template.model_validate(
            {
                "name": name,
                "match": {"keywords": keywords, "regex": regex},
                "steps": [{"id": "a", "worker": "coder", "task": "x"}],
            }
        )

    by_regex = make("zeta", [], [r"\bdeploy"])
    by_keyword = make("alpha", ["deploy"], [])
    assert best("deploy it", {"alpha": by_keyword, "zeta": by_regex}) is by_regex
    twin = make("beta", ["deploy"], [])
    assert best("deploy it", {"beta": twin, "alpha": by_keyword}) is by_keyword


# --- requests said in other words (issue 33) -------------------------------------------------
@pytest.mark.parametrize(
    ("request_text", "entities", "aspects"),
    [
        ("Between Go and Java, which one has better tooling?", ["Go", "Java"], ["tooling"]),
        ("Compare Ansible and Chef and pick one", ["Ansible", "Chef"], []),
        ("Nginx vs Apache：性能、配置难度", ["Nginx", "Apache"], ["性能", "配置难度"]),
        ("Sony A7 IV vs Canon R6 — autofocus, video", ["Sony A7 IV", "Canon R6"],
         ["autofocus", "video"]),
        ("MongoDB or Cassandra for time-series data?", ["MongoDB", "Cassandra"], []),
        ("Is Postgres faster than MySQL for analytics?", ["Postgres", "MySQL"], []),
        ("How do Docker and Podman differ in security?", ["Docker", "Podman"], ["security"]),
        ("We're torn between Bali and Phuket for our honeymoon", ["Bali", "Phuket"], []),
        ("Slack 和 Teams 有什么不一样？", ["Slack", "Teams"], []),
        ("北京同上海嘅天气有咩唔同？", ["北京", "上海"], ["天气"]),
        ("Python和Java的学习难度、就业前景对比", ["Python", "Java"], ["学习难度", "就业前景"]),
        ("Between trains and buses, which is faster for a daily commute?", ["trains", "buses"],
         []),  # who it is for is not an aspect
        ("iPhone 定 Pixel 好？", ["iPhone", "Pixel"], []),
        ("Rust, Go, Zig or C++ for a game engine?", ["Rust", "Go", "Zig", "C++"], []),
    ],
)  # fmt: skip
def test_comparisons_said_in_other_words(
    request_text: str, entities: list[str], aspects: list[str]
) -> None:
    parsed = parse_comparison(request_text)
    assert parsed is not None
    assert (list(parsed.entities), list(parsed.aspects)) == (entities, aspects)


def test_a_step_list_before_then_is_split_at_its_verbs() -> None:
    plan = decompose(
        "Find the latest figures, compute the growth rate, then draft a summary", WORKERS
    )
    assert [s.worker for s in plan.steps] == ["researcher", "analyst", "writer"]
    plan = decompose("Step 1: collect the data. Step 2: write the report.", WORKERS)
    assert [s.task for s in plan.steps] == ["collect the data", "write the report"]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Project the fixed and variable costs of a food truck", "analyst"),  # not a fix
        ("Review my cover letter for a software engineer position", "critic"),  # not code
        ("Explain Raft consensus", "researcher"),  # not the coder who "explains" code
        ("帮我看看这份合同有什么问题", "critic"),
        ("Create a Makefile for this C project", "coder"),  # a build file is code
        ("用Rust写一个命令行工具", "coder"),  # written in a programming language
        ("What is 15% of 240?", "analyst"),  # figures to work on, not a look-up
        ("Explain how vaccines work", "researcher"),  # "how X works" is no work to review
        ("Point out the weak spots in this research proposal", "critic"),
        ("用Kotlin实现一个二叉树", "coder"),  # "用<language>写/实现": code
        ("帮我看看这篇论文哪里不对", "critic"),  # "where is it wrong" asks for a review
    ],
)
def test_routing_reads_what_is_asked(task: str, expected: str) -> None:
    assert route(task, WORKERS, "researcher") == expected


def test_template_keywords_alone_make_no_plan() -> None:
    """ "review" is a keyword of code_review, but a review of a poem is no code review."""
    decision = plan_by_rules("Review this poem for rhythm", WORKERS, "researcher", _templates())
    assert decision.tier != "template"


def _templates() -> dict[str, Template]:
    return load_templates([BUILTIN_TEMPLATES_DIR])


def test_a_worker_that_cannot_search_gets_the_findings_of_one_that_can() -> None:
    team = [
        WorkerInfo("researcher", "Finds facts in documents and sources.", searches=True),
        WorkerInfo("writer", "Writes summaries and reports."),
    ]
    asked = "Write a short summary of how MongoDB secures access"
    plan = plan_by_rules(asked, team, "researcher", {}).plan
    assert [(s.id, s.worker, s.depends_on) for s in plan.steps] == [
        ("find_material", "researcher", []),
        ("task", "writer", ["find_material"]),
    ]
    assert plan.steps[1].task == asked
    # material the request brings is worked on as given; without a searcher, nothing to add
    assert len(plan_by_rules("Summarize this article", team, "researcher", {}).plan.steps) == 1
    alone = [WorkerInfo("writer", "Writes summaries and reports.")]
    assert len(plan_by_rules(asked, alone, "writer", {}).plan.steps) == 1


def test_a_wish_for_another_language_is_a_translation() -> None:
    content = [
        WorkerInfo("drafter", "Drafts blog posts, articles, essays, newsletters and emails."),
        WorkerInfo("editor", "Reviews drafts: clarity, tone, grammar; suggests better wording."),
        WorkerInfo("translator", "Translates text between English and Chinese, keeping the tone."),
    ]
    assert route("Put this paragraph into Japanese", content) == "translator"
    assert route("Give me this announcement in simplified Chinese", content) == "translator"
    assert route("Reword this paragraph so it sounds less stiff", content) == "editor"
    assert route("Write a blog post about tea", content) == "drafter"


def test_a_chinese_comparison_needs_its_entities_joined_by_a_word() -> None:
    assert parse_comparison("我想换货，应该找谁？") is None
    assert parse_comparison("这个方案还是不太好") is None  # 还是: "still", not "or"


def test_a_request_sharing_no_word_goes_by_meaning_when_it_is_clear() -> None:
    pytest.importorskip("wordllama")
    desk = [
        WorkerInfo("travel_agent", "Plans trips: flights, trains, hotels, itineraries and visas."),
        WorkerInfo("weather_bot", "Weather: forecasts, temperature, rain and climate."),
        WorkerInfo("concierge", "Everyday questions: restaurants, opening hours, recipes, gifts."),
    ]
    assert route("Where can I grab decent pho after midnight in Hanoi?", desk) == "concierge"
    assert route("xyzzy", desk, default="weather_bot") == "weather_bot"  # nothing to go by


def test_an_acronym_plural_is_the_acronym() -> None:
    """ "APIs" in a description meets "API" in a request ("analysis" stays "analysis")."""
    workers = [
        WorkerInfo("backend", "Writes code: APIs and scripts."),
        WorkerInfo("reviewer", "Reviews pull requests."),
    ]
    assert route("Build an API for orders", workers) == "backend"
