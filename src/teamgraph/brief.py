"""What a model request is for, as structured data: the :class:`Brief`; and what a pattern asks
of a member: the :class:`Assignment` (the prompt it reads, plus the same as a brief).

Every model request teamgraph makes carries a brief — the caller's role (planner, supervisor,
moderator, synthesizer, an agent working a task, ...), the user's request, the task and its
labelled context, the members to choose from, the limits. Real providers never see it: they get
the prompt, which can be reworded freely. teamgraph's own models (the offline model, the test
doubles) read the brief instead of the prompt text: :func:`current_brief` inside a model call.

The brief travels in a context variable set by the model-call path (:mod:`teamgraph.llm.call`)
around each call, so it reaches the model through any LangChain wrapper (tool binding,
structured output, retries) without ever becoming a provider parameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal[
    "agent",  # a member working a task (workflow step, supervisor pick, swarm turn, single)
    "planner",  # the workflow planner: a plan as JSON
    "synthesizer",  # the workflow's final answer from step results
    "supervisor",  # the supervisor's next decision (structured)
    "moderator",  # is the request clear enough? (structured)
    "structured",  # an agent's final answer as its output schema (structured)
    "reranker",  # search_docs' passages in order of use (a team's ``rerank: true``)
]
Purpose = Literal["", "outline", "research", "draft", "review"]  # collaborative roles' work


@dataclass(frozen=True)
class Member:
    """A worker or member the caller may choose from (``searches``: it has a tool to find
    documents)."""

    name: str
    description: str
    searches: bool = False


@dataclass(frozen=True)
class ToolInfo:
    """A tool offered through a text protocol (``react``/``codeact``): its call schema."""

    name: str
    description: str
    arguments: dict[str, Any]  # JSON Schema properties of the arguments a model passes


@dataclass(frozen=True)
class Brief:
    """What one model request is for. Only ``role`` is required; each role fills its fields."""

    role: Role
    request: str = ""  # the user's request the run (or this turn) serves
    task: str = ""  # what this agent should do now (without its context)
    context: tuple[tuple[str, str], ...] = ()  # labelled blocks: step outputs, plan, draft, ...
    members: tuple[Member, ...] = ()  # planner: the workers; supervisor: the members
    max_steps: int | None = None  # planner: the plan's size limit
    transcript: tuple[tuple[str, str], ...] = ()  # supervisor: (speaker, text), oldest first
    agent_kind: str = "function"  # agent: function | react | codeact
    tools: tuple[ToolInfo, ...] = ()  # react/codeact: the tools the text protocol offers
    handoff_from: str | None = None  # swarm: who handed the conversation over, mid-turn
    purpose: Purpose = ""  # collaborative: which part of the work this is
    schema: str = ""  # structured: the name of the output schema


@dataclass(frozen=True)
class Assignment:
    """What a pattern asks of a member: ``text`` is the prompt it reads (an agent's task, or a
    nested team's request), ``brief`` the same as data for teamgraph's own models."""

    text: str
    brief: Brief

    @classmethod
    def of(cls, text: str) -> Assignment:
        """A plain task with no context."""
        return cls(text, Brief(role="agent", request=text, task=text))


_current: ContextVar[Brief | None] = ContextVar("teamgraph_brief", default=None)


def current_brief() -> Brief | None:
    """The brief of the model request being made, inside a model call (else ``None``)."""
    return _current.get()


@contextmanager
def briefed(brief: Brief | None) -> Iterator[None]:
    """Make ``brief`` the current one for the model call inside the block."""
    token = _current.set(brief)
    try:
        yield
    finally:
        _current.reset(token)
