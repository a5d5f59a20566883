"""Structured output: the agent's final answer as its ``output_schema``, validated."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel

from teamgraph import prompts
from teamgraph.agents.base import AgentOutcome
from teamgraph.errors import AgentFailed
from teamgraph.llm.call import StructuredOutputError


async def structured_answer(outcome: AgentOutcome) -> AgentOutcome:
    """Ask for the answer as ``output_schema``, through the model-call path (budget, retries,
    journal, usage); one more attempt with the validation error when the reply is invalid."""
    turn = outcome.turn
    assert turn is not None
    schema = turn.agent.output_schema
    assert schema is not None
    if isinstance(schema, dict) and "title" not in schema:  # the tool name providers require
        schema = {"title": "final_answer", "description": "The final answer.", **schema}
    messages: list[BaseMessage] = [
        *outcome.messages,
        HumanMessage(prompts.structured_request(_schema_text(schema))),
    ]
    try:
        value = await turn.ask_structured(schema, messages)
    except StructuredOutputError as exc:
        raise AgentFailed(
            f"agent {turn.agent.name!r} returned invalid structured output twice: {exc}"
        ) from None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    text = json.dumps(data, ensure_ascii=False)
    return AgentOutcome(text, outcome.messages, value, start=outcome.start, turn=turn)


def _schema_text(schema: Any) -> str:
    data = (
        schema.model_json_schema()
        if isinstance(schema, type) and issubclass(schema, BaseModel)
        else schema
    )
    return json.dumps(data, ensure_ascii=False)
