"""What one agent is: name, role, instructions, tools and model."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

AgentKind = Literal["function", "react", "codeact"]
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")


class AgentSpec(BaseModel):
    """A specialist agent. ``model`` is a ``provider:model`` string or ``offline``;
    ``None`` means "use the team's model"."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = Field(min_length=1)
    instructions: str = ""
    kind: AgentKind = "function"
    tools: list[str] = Field(default_factory=list)
    model: str | None = None
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    can_handoff_to: list[str] = Field(default_factory=list)
    max_iterations: int = Field(default=20, ge=1, le=1000)
    on_max_iterations: Literal["error", "generate"] = Field(
        default="error",
        description="At the limit: fail, or make one last model call without tools and answer.",
    )
    output_schema: dict[str, Any] | type[BaseModel] | None = Field(
        default=None, description="A pydantic model (Python) or a JSON Schema (YAML)."
    )

    @property
    def searches(self) -> bool:
        """Whether it has a tool to find documents (``search_docs``, a web search, ...)."""
        return any("search" in tool for tool in self.tools)

    @field_serializer("output_schema")
    def _schema_as_json(self, value: dict[str, Any] | type[BaseModel] | None) -> Any:
        if isinstance(value, type):
            return value.model_json_schema()
        return value

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits, '_' or '-' (max 64)"
            )
        return value
