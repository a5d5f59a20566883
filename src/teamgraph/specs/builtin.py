"""The built-in workers every team can use by name, and override field by field."""

from __future__ import annotations

from teamgraph.specs.agent import AgentSpec

BUILTIN_WORKERS: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in [
        AgentSpec(
            name="researcher",
            description="Research specialist: searches documents and sources to gather facts, "
            "evidence and data about a topic.",
            instructions="Find facts relevant to the task with your tools. Quote what you found, "
            "name the source of every fact, and say plainly when nothing relevant was found.",
            tools=["search_docs"],
        ),
        AgentSpec(
            name="coder",
            description="Software engineer: writes, reviews and debugs code; explains "
            "implementation details, bugs and fixes.",
            instructions="Answer with working code and a short explanation. Point out bugs, "
            "security problems and edge cases you see.",
        ),
        AgentSpec(
            name="analyst",
            description="Analyst: compares options, evaluates trade-offs, computes figures and "
            "draws conclusions from data and findings.",
            instructions="Weigh the evidence you are given, compare the options on each criterion, "
            "and state a clear conclusion with its reasons.",
        ),
        AgentSpec(
            name="writer",
            description="Writer: summarizes findings and writes clear reports, overviews, "
            "summaries and final answers.",
            instructions="Write a clear, well-structured answer from the context you are given. "
            "Keep every claim traceable to that context.",
        ),
        AgentSpec(
            name="critic",
            description="Critic and reviewer: checks work for errors, gaps, risks and quality, and "
            "suggests improvements.",
            instructions="Review the work you are given. List concrete problems and how to fix "
            "them; say what is good enough as it is.",
        ),
    ]
}
