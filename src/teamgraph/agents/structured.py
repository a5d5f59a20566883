"""Structured output: a validated object from the agent's final answer, one retry on invalid."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from teamgraph import prompts
from teamgraph.agents.base import AgentOutcome, AgentTurn
from teamgraph.errors import AgentFailed


async def structured_answer(turn: AgentTurn, outcome: AgentOutcome) -> AgentOutcome:
    """Ask for the answer as ``output_schema``; retry once with the validation error."""
    schema = turn.agent.output_schema
    assert schema is not None
    if isinstance(schema, dict) and "title" not in schema:  # the tool name providers require
        schema = {"title": "final_answer", "description": "The final answer.", **schema}
    runnable = turn.model.with_structured_output(schema, include_raw=True)
    messages: list[BaseMessage] = [
        *outcome.messages,
        HumanMessage(prompts.structured_request(_schema_text(schema))),
    ]
    error = ""
    for _ in range(2):
        raw = await runnable.ainvoke(messages)
        assert isinstance(raw, dict)
        reply = raw.get("raw")
        if isinstance(reply, AIMessage):
            turn.ctx.usage.record(turn.agent.name, turn.step_id, turn.model_name, reply)
        value, error = _validated(schema, raw.get("parsed"), raw.get("parsing_error"))
        if not error:
            data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
            return AgentOutcome(json.dumps(data, ensure_ascii=False), outcome.messages, value)
        messages.append(HumanMessage(prompts.structured_retry(error)))
    raise AgentFailed(
        f"agent {turn.agent.name!r} returned invalid structured output twice: {error}"
    )


def _validated(schema: Any, parsed: Any, parsing_error: Any) -> tuple[Any, str]:
    if parsing_error is not None:
        return None, str(parsing_error)
    if parsed is None:
        return None, "no structured output was returned"
    if isinstance(schema, dict):
        try:
            jsonschema.validate(parsed, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(map(str, exc.absolute_path)) or "<root>"
            return None, f"{where}: {exc.message}"
    return parsed, ""


def _schema_text(schema: Any) -> str:
    data = (
        schema.model_json_schema()
        if isinstance(schema, type) and issubclass(schema, BaseModel)
        else schema
    )
    return json.dumps(data, ensure_ascii=False)
