"""What a team is: its members, how they cooperate and the options of that pattern."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from teamgraph.specs.agent import AgentSpec

Pattern = Literal["workflow"]
Synthesizer = Literal["concat", "llm"]


class RetryOptions(BaseModel):
    """Retries of transient model errors (timeouts, 429, 5xx, connection errors)."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=3, ge=1, le=20)
    initial_delay_s: float = Field(default=0.5, ge=0)
    max_delay_s: float = Field(default=8.0, ge=0)
    jitter_s: float = Field(default=0.5, ge=0)


class WorkflowOptions(BaseModel):
    """Options of the ``workflow`` pattern (planner → parallel workers → synthesizer)."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(default=10, ge=1, le=200)
    max_parallel: int = Field(default=4, ge=1, le=256)
    fail_fast: bool = False
    synthesizer: Synthesizer = "concat"
    confidence_threshold: float = Field(default=0.4, ge=0, le=1)
    default_worker: str | None = None
    context_token_budget: int = Field(default=2000, ge=50)
    templates_dirs: list[str] = Field(default_factory=list)
    retry: RetryOptions = Field(default_factory=RetryOptions)


DEFAULT_SENSITIVE_PATTERNS = [
    "delete",
    "remove",
    "drop",
    "modify",
    "write",
    "update",
    "execute_sql",
    "send_email",
    "transfer",
    "pay",
]


class ApprovalOptions(BaseModel):
    """Which tool calls need a human's approval: named tools, plus name patterns."""

    model_config = ConfigDict(extra="forbid")

    tools: list[str] = Field(default_factory=list, description="Tools that always need approval.")
    patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SENSITIVE_PATTERNS),
        description="A tool whose name contains one of these (case-insensitive) needs approval.",
    )

    def requires_approval(self, tool: str, flagged: bool = False) -> bool:
        lowered = tool.lower()
        return flagged or tool in self.tools or any(p.lower() in lowered for p in self.patterns)


class McpServer(BaseModel):
    """An MCP server started as a subprocess speaking MCP over stdio."""

    model_config = ConfigDict(extra="forbid")

    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None


DEFAULT_STATE_PROMPT = "Current shared state:\n{state}\n\n{msg}"


class TeamSpec(BaseModel):
    """A team of agents. ``members`` are full specs; :func:`teamgraph.specs.loader.load_team`
    turns built-in names and partial overrides into full specs."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    pattern: Pattern = "workflow"
    model: str = "offline"
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    members: list[AgentSpec] = Field(min_length=1)
    knowledge: list[str] = Field(default_factory=list, description="Paths indexed for search_docs")
    workflow: WorkflowOptions = Field(default_factory=WorkflowOptions)
    approvals: ApprovalOptions = Field(default_factory=ApprovalOptions)
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict, description="MCP servers whose tools members name mcp:<server>/<tool>"
    )
    initial_state: dict[str, Any] | None = Field(
        default=None, description="Shared state shown to agents and updatable by tools."
    )
    state_prompt: str = Field(
        default=DEFAULT_STATE_PROMPT,
        description="How the shared state is shown: a template with {state} and {msg}.",
    )

    @field_validator("state_prompt")
    @classmethod
    def _state_prompt_placeholders(cls, value: str) -> str:
        missing = [p for p in ("{state}", "{msg}") if p not in value]
        if missing:
            raise ValueError(f"must contain {' and '.join(missing)}")
        return value

    @model_validator(mode="after")
    def _check_members(self) -> TeamSpec:
        names = [m.name for m in self.members]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"members: duplicate member name {dupes[0]!r}")
        default = self.workflow.default_worker
        if default is not None and default not in names:
            raise ValueError(
                f"workflow.default_worker {default!r} is not a member; members: {', '.join(names)}"
            )
        for member in self.members:
            for target in member.can_handoff_to:
                if target not in names:
                    raise ValueError(
                        f"members: {member.name!r} can_handoff_to unknown worker {target!r}"
                    )
        return self

    def member(self, name: str) -> AgentSpec:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)

    @property
    def default_worker(self) -> str:
        return self.workflow.default_worker or self.members[0].name
