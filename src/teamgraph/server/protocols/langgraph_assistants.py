"""The Agent Protocol's assistants — one per served team — and the server's ``/info``: what
clients (agent-chat-ui, LangGraph Studio) read before they run anything. Routes of
:mod:`.agent_protocol`'s router (``/langgraph``)."""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, ConfigDict, Field

from teamgraph.server.deps import CurrentUser, State
from teamgraph.server.protocols.langgraph_threads import contains
from teamgraph.server.state import AppState

router = APIRouter()


class AssistantQuery(BaseModel):
    model_config = ConfigDict(extra="allow")

    metadata: dict[str, Any] = Field(default_factory=dict)
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


# --- the server ----------------------------------------------------------------------------
@router.get("/info")
async def info() -> dict[str, Any]:
    """What the server is, as a LangGraph server says it (no credential needed: clients such
    as agent-chat-ui check it before they log in; it tells nothing about anyone's data)."""
    return {
        "version": _version("teamgraph"),
        "langgraph_py_version": _version("langgraph"),
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "host": {"kind": "teamgraph", "project_id": None, "revision_id": None},
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


# --- assistants ----------------------------------------------------------------------------
def _assistant(state: AppState, name: str) -> dict[str, Any]:
    spec = state.teams[name].spec
    return {
        "assistant_id": name,
        "graph_id": name,
        "name": name,
        "description": spec.description,
        "config": {},
        "context": {},
        "metadata": {"pattern": spec.pattern},
        "version": 1,
        "created_at": _EPOCH,
        "updated_at": _EPOCH,
    }


_EPOCH = "1970-01-01T00:00:00+00:00"


@router.post("/assistants/search")
async def searchmatching(
    user: CurrentUser, state: State, body: AssistantQuery | None = None
) -> list[dict[str, Any]]:
    """The served teams that match ``metadata`` (``{"pattern": ...}``), ``graph_id`` and
    ``name`` (a part of it), by name unless ``sort_by`` says otherwise, paged."""
    query = body or AssistantQuery()
    found = matching(state, query)
    if query.sort_by:
        found.sort(key=lambda a: a[query.sort_by or ""], reverse=query.sort_order == "desc")
    elif query.sort_order == "desc":
        found.reverse()
    return found[query.offset : query.offset + query.limit]


@router.post("/assistants/count")
async def countmatching(user: CurrentUser, state: State, body: AssistantQuery | None = None) -> int:
    return len(matching(state, body or AssistantQuery()))


def matching(state: AppState, query: AssistantQuery) -> list[dict[str, Any]]:
    every = [_assistant(state, name) for name in sorted(state.teams)]
    return [
        a
        for a in every
        if contains(a["metadata"], query.metadata)
        and (query.graph_id is None or a["graph_id"] == query.graph_id)
        and (query.name is None or query.name.lower() in a["name"].lower())
    ]


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    return _assistant(state, served(state, assistant_id))


@router.get("/assistants/{assistant_id}/graph")
async def get_graph(assistant_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    """The team's compiled LangGraph graph as LangGraph's ``get_graph().to_json()`` draws it
    (``{"nodes": [...], "edges": [...]}``), what Studio draws."""
    graph = state.runs.runner(served(state, assistant_id)).graph.get_graph()
    drawn: dict[str, Any] = json.loads(json.dumps(graph.to_json(), default=str))
    return drawn


@router.get("/assistants/{assistant_id}/schemas")
async def get_schemas(assistant_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    """What a run of the assistant takes and gives: ``{"messages": [...]}`` (LangChain
    messages; the last human one is the request); no configuration or context."""
    return {
        "graph_id": served(state, assistant_id),
        "input_schema": MESSAGES_SCHEMA,
        "output_schema": MESSAGES_SCHEMA,
        "state_schema": MESSAGES_SCHEMA,
        "config_schema": {"title": "Config", "type": "object", "properties": {}},
        "context_schema": None,
    }


@router.get("/assistants/{assistant_id}/subgraphs")
async def get_subgraphs(assistant_id: str, user: CurrentUser, state: State) -> dict[str, Any]:
    """None listed: a team's nested teams run as parts of its own graph."""
    served(state, assistant_id)
    return {}


def served(state: AppState, assistant_id: str) -> str:
    if assistant_id not in state.teams:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="Assistant not found")
    return assistant_id


MESSAGES_SCHEMA: dict[str, Any] = {
    "title": "State",
    "type": "object",
    "properties": {
        "messages": {
            "title": "Messages",
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "content": {}},
                "required": ["type", "content"],
            },
        }
    },
    "required": ["messages"],
}
