"""The offline model as a LangChain chat model: answers, tool calls, structured output, plans."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from teamgraph import prompts
from teamgraph.brief import Brief, Member, briefed
from teamgraph.knowledge import KnowledgeBase
from teamgraph.llm._comparison import comparison_answer
from teamgraph.llm._extractive import Source, relevant
from teamgraph.llm.offline import OfflineChatModel
from teamgraph.plan import Plan, PlanRules
from teamgraph.planning.request_structure import parse_comparison
from teamgraph.planning.templates import BUILTIN_TEMPLATES_DIR, load_templates
from teamgraph.specs.builtin import BUILTIN_WORKERS
from teamgraph.tools.search_docs import make_search_docs_tool

REPO = Path(__file__).resolve().parents[1]
KNOWLEDGE = REPO / "examples" / "knowledge"
RESEARCH_MEMBERS = ["researcher", "analyst", "writer", "critic"]
RESEARCH_TASK = (
    "Research performance of PostgreSQL and MongoDB: find facts about each and how they differ."
)


@pytest.fixture
def model() -> OfflineChatModel:
    return OfflineChatModel()


@pytest.fixture
def search_docs(tmp_path: Path) -> BaseTool:
    kb = KnowledgeBase(tmp_path / "kb.db")
    kb.ingest([KNOWLEDGE])
    return make_search_docs_tool(kb)


@tool
def send_invoice(customer: str, amount: float) -> str:
    """Billing: send an invoice to a customer for the amount due on their account."""
    return f"invoice sent to {customer}"


class Verdict(BaseModel):
    summary: str
    score: int
    approved: bool


def researcher_turn(task: str) -> list[BaseMessage]:
    spec = BUILTIN_WORKERS["researcher"]
    return [
        SystemMessage(prompts.worker_system(spec.name, spec.description, spec.instructions)),
        HumanMessage(task),
    ]


def planner_turn(request: str, max_steps: int = 10) -> list[BaseMessage]:
    system = prompts.planner_system(
        "research",
        [(name, BUILTIN_WORKERS[name].description) for name in RESEARCH_MEMBERS],
        [(t.name, t.description) for t in load_templates([BUILTIN_TEMPLATES_DIR]).values()],
        max_steps,
    )
    return [SystemMessage(system), HumanMessage(request)]


def planner_brief(request: str, max_steps: int = 10) -> Brief:
    members = tuple(Member(n, BUILTIN_WORKERS[n].description) for n in RESEARCH_MEMBERS)
    return Brief(role="planner", request=request, members=members, max_steps=max_steps)


def plan_for(model: OfflineChatModel, request: str, max_steps: int = 10) -> Plan:
    with briefed(planner_brief(request, max_steps)):
        reply = model.invoke(planner_turn(request, max_steps))
    assert reply.text.lstrip().startswith("```json"), reply.text
    plan, errors = PlanRules(tuple(RESEARCH_MEMBERS), max_steps).parse(reply.text)
    assert plan is not None, errors
    assert errors == []
    return plan


def assert_usage(message: AIMessage) -> None:
    usage = message.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def merged(chunks: list[Any]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    assert isinstance(total, AIMessageChunk)
    return total


# --- answers --------------------------------------------------------------------------------------
def test_plain_invoke_answers_and_says_it_is_offline(model: OfflineChatModel) -> None:
    reply = model.invoke("What is the capital of France?")

    assert isinstance(reply, AIMessage)
    assert not reply.tool_calls
    assert reply.text.strip()
    assert "Offline model" in reply.text
    assert_usage(reply)


def test_answers_from_the_context_of_previous_steps(model: OfflineChatModel) -> None:
    context = [
        (
            "research_cost",
            "PostgreSQL is free and open source software. "
            "MongoDB Atlas is billed per cluster hour.",
        )
    ]
    assignment = prompts.worker_assignment("Write a summary of the cost of PostgreSQL", context)

    with briefed(assignment.brief):
        reply = model.invoke(researcher_turn(assignment.text))

    assert "Offline model" in reply.text
    assert "research_cost" in reply.text
    assert "PostgreSQL is free and open source software." in reply.text
    assert_usage(reply)


def test_synthesizer_prompt_is_answered_from_the_step_results(model: OfflineChatModel) -> None:
    results = [
        ("research_security", "researcher", "PostgreSQL supports row-level security policies."),
        ("research_cost", "researcher", "MongoDB Atlas is billed per cluster hour."),
    ]
    messages = [
        SystemMessage(prompts.synthesizer_system("research")),
        HumanMessage(prompts.synthesizer_prompt("Compare PostgreSQL and MongoDB", results)),
    ]
    context = tuple((f"{sid} ({worker})", text) for sid, worker, text in results)
    brief = Brief(role="synthesizer", request="Compare PostgreSQL and MongoDB", context=context)

    with briefed(brief):
        reply = model.invoke(messages)

    assert "Offline model" in reply.text
    assert "PostgreSQL supports row-level security policies." in reply.text
    assert "MongoDB Atlas is billed per cluster hour." in reply.text
    assert_usage(reply)


# --- tools ----------------------------------------------------------------------------------------
def test_a_research_task_calls_the_search_tool(
    model: OfflineChatModel, search_docs: BaseTool
) -> None:
    reply = model.bind_tools([search_docs]).invoke(researcher_turn(RESEARCH_TASK))

    assert isinstance(reply, AIMessage)
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call["name"] == "search_docs"
    assert isinstance(call["args"]["query"], str)
    assert call["args"]["query"].strip()
    assert call["id"]
    assert_usage(reply)


def test_an_unrelated_tool_is_not_called(model: OfflineChatModel) -> None:
    reply = model.bind_tools([send_invoice]).invoke(researcher_turn(RESEARCH_TASK))

    assert not reply.tool_calls
    assert "Offline model" in reply.text
    assert_usage(reply)


def test_the_matching_tool_is_chosen_among_several(
    model: OfflineChatModel, search_docs: BaseTool
) -> None:
    reply = model.bind_tools([send_invoice, search_docs]).invoke(researcher_turn(RESEARCH_TASK))

    assert [c["name"] for c in reply.tool_calls] == ["search_docs"]


def test_after_a_tool_result_it_answers_quoting_that_result(
    model: OfflineChatModel, search_docs: BaseTool
) -> None:
    bound = model.bind_tools([search_docs])
    messages = researcher_turn(RESEARCH_TASK)
    call_reply = bound.invoke(messages)
    call = call_reply.tool_calls[0]
    result = search_docs.invoke(call["args"])
    assert "PostgreSQL" in result or "MongoDB" in result  # the knowledge base found something

    reply = bound.invoke(
        [*messages, call_reply, ToolMessage(result, tool_call_id=call["id"], name=call["name"])]
    )

    assert not reply.tool_calls  # it answers instead of searching forever
    assert "Offline model" in reply.text
    quoted = [line.split("**: ", 1)[1] for line in reply.text.splitlines() if "**: " in line]
    assert quoted, reply.text
    flat_result = " ".join(result.split())
    for passage in quoted:
        for sentence in passage.split(". "):
            assert " ".join(sentence.split()).rstrip(".") in flat_result, sentence
    assert_usage(reply)


def test_a_forced_tool_is_called_with_arguments_of_its_schema(model: OfflineChatModel) -> None:
    reply = model.bind_tools([send_invoice], tool_choice="send_invoice").invoke(
        "Invoice ACME Corp for 250 dollars"
    )

    (call,) = reply.tool_calls
    assert call["name"] == "send_invoice"
    assert isinstance(call["args"]["customer"], str)
    assert isinstance(call["args"]["amount"], float)
    assert send_invoice.invoke(call["args"]).startswith("invoice sent to")


def test_structured_output_returns_the_schema(model: OfflineChatModel) -> None:
    answer = model.with_structured_output(Verdict).invoke("Rate this pull request from 1 to 10")

    assert isinstance(answer, Verdict)


def test_structured_output_raw_reply_carries_usage(model: OfflineChatModel) -> None:
    out = model.with_structured_output(Verdict, include_raw=True).invoke("Rate this from 1 to 10")

    assert out["parsing_error"] is None
    assert isinstance(out["parsed"], Verdict)
    assert_usage(out["raw"])


# --- plans ----------------------------------------------------------------------------------------
def test_plans_an_english_comparison_per_aspect(model: OfflineChatModel) -> None:
    plan = plan_for(model, "Compare PostgreSQL and MongoDB on performance, security and cost")

    assert [s.id for s in plan.steps] == [
        "research_performance",
        "research_security",
        "research_cost",
        "summary",
    ]
    research, summary = plan.steps[:3], plan.steps[3]
    assert all(s.depends_on == [] for s in research)
    assert sorted(summary.depends_on) == sorted(s.id for s in research)
    assert {s.worker for s in research} == {"researcher"}
    assert summary.worker == "writer"
    for step, aspect in zip(research, ["performance", "security", "cost"], strict=True):
        assert aspect in step.task
        assert "PostgreSQL" in step.task
        assert "MongoDB" in step.task
    assert set(plan.entities) == {"PostgreSQL", "MongoDB"}


def test_plans_a_chinese_comparison_per_aspect(model: OfflineChatModel) -> None:
    plan = plan_for(model, "比较 PostgreSQL 和 MongoDB 的性能、安全和成本")

    assert len(plan.steps) == 4
    research, summary = plan.steps[:3], plan.steps[3]
    assert all(s.depends_on == [] for s in research)
    assert sorted(summary.depends_on) == sorted(s.id for s in research)
    for step, aspect in zip(research, ["性能", "安全", "成本"], strict=True):
        assert aspect in step.task
        assert "PostgreSQL" in step.task
        assert "MongoDB" in step.task
    assert {s.worker for s in research} == {"researcher"}
    assert summary.worker == "writer"


def test_plans_an_ordered_request_as_a_chain(model: OfflineChatModel) -> None:
    plan = plan_for(model, "First collect the data, then analyze it, then write the report")

    assert len(plan.steps) == 3
    first, second, third = plan.steps
    assert first.depends_on == []
    assert second.depends_on == [first.id]
    assert third.depends_on == [second.id]
    assert "collect the data" in first.task
    assert "analyze it" in second.task
    assert "write the report" in third.task
    assert [s.worker for s in plan.steps] == ["researcher", "analyst", "writer"]


def test_plans_respect_the_step_limit_of_the_prompt(model: OfflineChatModel) -> None:
    plan = plan_for(
        model, "Compare PostgreSQL and MongoDB on performance, security and cost", max_steps=2
    )

    assert 1 <= len(plan.steps) <= 2


def test_planner_reply_carries_usage(model: OfflineChatModel) -> None:
    with briefed(planner_brief("Compare Redis and PostgreSQL")):
        assert_usage(model.invoke(planner_turn("Compare Redis and PostgreSQL")))


# --- streaming, latency ---------------------------------------------------------------------------
async def test_streamed_answer_equals_the_invoked_answer(model: OfflineChatModel) -> None:
    question = "What is the capital of France?"

    chunks = [chunk async for chunk in model.astream(question)]
    whole = await model.ainvoke(question)

    assert len(chunks) > 3
    assert "".join(str(c.content) for c in chunks) == whole.text
    total = merged(chunks)
    assert total.usage_metadata == whole.usage_metadata
    assert_usage(whole)


async def test_a_streamed_tool_call_merges_into_one_call(
    model: OfflineChatModel, search_docs: BaseTool
) -> None:
    bound = model.bind_tools([search_docs])
    messages = researcher_turn(RESEARCH_TASK)

    total = merged([chunk async for chunk in bound.astream(messages)])
    whole = await bound.ainvoke(messages)

    assert [c["name"] for c in total.tool_calls] == [c["name"] for c in whole.tool_calls]
    assert total.tool_calls[0]["args"] == whole.tool_calls[0]["args"]
    assert total.usage_metadata == whole.usage_metadata


async def test_latency_delays_every_async_reply() -> None:
    slow = OfflineChatModel(latency=0.2)

    started = time.perf_counter()
    await slow.ainvoke("hello there")
    chunks = [chunk async for chunk in slow.astream("hello there")]
    elapsed = time.perf_counter() - started

    assert chunks
    assert elapsed >= 0.4


# --- extractive answers ----------------------------------------------------------------------
def test_sentences_never_cut_a_code_span_and_skip_a_document_describing_itself() -> None:
    from teamgraph.llm._extractive import sentences

    text = (
        "These notes cover performance, security and cost. Enable it with `ALTER TABLE ... "
        "ENABLE ROW LEVEL SECURITY` and write policies. Superusers skip policies."
    )
    assert sentences(text) == [
        "Enable it with `ALTER TABLE ... ENABLE ROW LEVEL SECURITY` and write policies.",
        "Superusers skip policies.",
    ]


def test_an_answer_covers_every_subject_and_quotes_a_sentence_once() -> None:
    from teamgraph.llm._extractive import Source, extractive_answer

    performance = Source(
        "performance",
        "MongoDB supports many index types. MongoDB stores documents. "
        "PostgreSQL plans queries with statistics.",
    )
    repeated = Source("again", "MongoDB supports many index types.")
    answer = extractive_answer("Compare PostgreSQL and MongoDB", [performance, repeated])
    first = answer.split("**performance**: ", 1)[1].split("\n")[0]
    assert "PostgreSQL" in first and "MongoDB" in first  # one sentence for each subject
    assert answer.count("MongoDB supports many index types.") == 1
    assert "**again**" not in answer


def test_a_note_is_saved_as_written() -> None:
    from teamgraph.llm.offline import fill_arguments

    schema = {"properties": {"text": {"type": "string"}}, "required": ["text"]}
    args = fill_arguments(schema, "Save a note: Redis keeps data in memory")
    assert args == {"text": "Redis keeps data in memory"}
    query = {"properties": {"query": {"type": "string"}}, "required": ["query"]}
    assert fill_arguments(query, "Find how Redis persists data")["query"] == "Redis persists data"


# --- answers worth reading (issue 33) --------------------------------------------------------
def test_without_material_the_answer_says_what_it_would_need(model: OfflineChatModel) -> None:
    with briefed(
        Brief(role="agent", request="Tell me about quasars", task="Tell me about quasars")
    ):
        reply = model.invoke([HumanMessage("Tell me about quasars")])
    assert "No documents, tool results or previous steps were available" not in reply.text
    assert "search_docs" in reply.text and "knowledge" in reply.text


def test_a_passage_that_only_names_the_subject_is_not_quoted() -> None:
    sources = [
        Source("mongodb.md — MongoDB", "MongoDB is a document database that scales out."),
        Source("mongodb.md — MongoDB > Security", "MongoDB security needs authorization on."),
    ]
    kept = relevant("What does MongoDB security need?", sources)
    assert [s.label for s in kept] == ["mongodb.md — MongoDB > Security"]


def test_a_quality_noun_finds_passages_that_use_its_adjective() -> None:
    sources = [
        Source("mongodb.md > Storage", "WiredTiger makes data durable through a journal."),
        Source("redis.md > Use", "Redis trades durability for speed."),
    ]
    kept = relevant("Research the durability of Redis and MongoDB", sources)
    assert [s.label for s in kept] == ["mongodb.md > Storage", "redis.md > Use"]
    comparison = parse_comparison("Compare Redis and MongoDB on durability")
    assert comparison is not None
    answer = comparison_answer(comparison, sources)
    assert "- **MongoDB**: WiredTiger makes data durable through a journal." in answer


def test_a_comparison_summary_covers_every_entity_and_aspect_with_verdicts() -> None:
    comparison = parse_comparison("Compare Redis, Memcached and MySQL on cost and speed")
    assert comparison is not None
    sources = [
        Source("redis.md > Cost", "Redis is free and open-source under a permissive licence."),
        Source("memcached.md > Cost", "Memcached costs nothing but needs extra ops work."),
        Source("redis.md > Speed", "Redis is fast: reads take under a millisecond."),
        Source("memcached.md > Speed", "Memcached is slow to warm after a restart."),
    ]
    answer = comparison_answer(comparison, sources)
    assert "| aspect | Redis | Memcached | MySQL | verdict |" in answer
    assert "### Cost" in answer and "### Speed" in answer and "### Conclusion" in answer
    assert "- **MySQL**: no passage found." in answer  # a third entity is never dropped
    assert "Redis ahead" in answer and "(redis.md > Speed)" in answer


def test_a_chinese_comparison_is_answered_in_chinese_from_english_passages_too() -> None:
    comparison = parse_comparison("比较 Redis 和 Memcached 的性能和成本")
    assert comparison is not None
    sources = [
        Source("redis.md > Performance", "Redis is fast: reads take under a millisecond."),
        Source("memcached.md > Performance", "Memcached is slow to warm after a restart."),
        Source("redis.md > Cost", "Redis is free under a permissive licence."),
    ]
    answer = comparison_answer(comparison, sources)
    assert (
        "- **Redis**: Redis is fast: reads take under a millisecond." in answer
    )  # 性能 = performance
    assert "- **Memcached**: 未找到相关段落。" in answer  # on cost: nothing, said in Chinese
    assert "| 方面 | Redis | Memcached | 判断 |" in answer
    assert "### 结论" in answer and "依材料，Redis 占优" in answer
    assert "Verdict" not in answer and "no passage found" not in answer


def test_the_closing_step_of_a_comparison_plan_names_its_comparison() -> None:
    from teamgraph.planning.routing import WorkerInfo
    from teamgraph.planning.rules import comparison_in_task, decompose

    workers = [WorkerInfo(s.name, s.description) for s in BUILTIN_WORKERS.values()]
    for request in ("Compare A1 and B2 on cost and speed", "比较 A1 和 B2 的成本和速度"):
        plan = decompose(request, workers)
        found = comparison_in_task(plan.steps[-1].task)
        assert found is not None
        assert (list(found.entities), list(found.aspects)) == (plan.entities, plan.aspects)


def test_a_template_task_searches_with_the_request_it_serves() -> None:
    from teamgraph.llm._extractive import search_query

    task = (
        "Research the topic of the request. Gather the key facts and name their sources."
        "\n\nUser's original request: What are Redis persistence options?"
    )
    assert search_query(task) == "Redis persistence"  # "options" names no subject
