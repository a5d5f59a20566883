"""What a team is: its members, how they cooperate and the options of that pattern."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from teamgraph.specs.agent import AgentSpec

Pattern = Literal["workflow", "supervisor", "swarm", "collaborative", "single"]
Synthesizer = Literal["concat", "llm"]


class RetryOptions(BaseModel):
    """Retries of transient model errors (timeouts, 429, 5xx, connection errors)."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=3, ge=1, le=20)
    initial_delay_s: float = Field(default=0.5, ge=0)
    max_delay_s: float = Field(default=8.0, ge=0)
    jitter_s: float = Field(default=0.5, ge=0)


class PlanCacheOptions(BaseModel):
    """The plan cache of a workflow team (docs/concepts.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="false: this team never reuses a plan.")
    threshold: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Similarity a request needs to reuse a plan; unset: the "
        "plan_cache_threshold setting.",
    )


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
    plan_cache: PlanCacheOptions = Field(default_factory=PlanCacheOptions)


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


class SupervisorOptions(BaseModel):
    """Options of the ``supervisor`` pattern."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=10, ge=1, le=200, description="Supervisor decisions per run.")
    output_mode: Literal["last_message", "full_history"] = Field(
        default="last_message",
        description="What a worker adds to the shared transcript: its answer or its whole history.",
    )


class SwarmOptions(BaseModel):
    """Options of the ``swarm`` pattern."""

    model_config = ConfigDict(extra="forbid")

    default_agent: str | None = Field(default=None, description="Who takes a new thread.")
    max_handoffs: int = Field(default=10, ge=1, le=200, description="Handoffs per user turn.")


class CollaborativeOptions(BaseModel):
    """Options of the ``collaborative`` pattern: which member plays which role."""

    model_config = ConfigDict(extra="forbid")

    planner: str | None = None
    researcher: str | None = None
    writer: str | None = None
    reviewer: str | None = None
    max_iterations: int = Field(default=3, ge=1, le=20, description="Write/review rounds.")


class Budget(BaseModel):
    """Limits per run, enforced across nested teams and parallel branches."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int | None = Field(default=None, ge=1)
    max_usd: float | None = Field(default=None, gt=0)
    max_model_calls: int | None = Field(default=None, ge=1)


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


COLLECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # a named knowledge collection
DEFAULT_STATE_PROMPT = "Current shared state:\n{state}\n\n{msg}"


class TeamSpec(BaseModel):
    """A team of agents. ``members`` are full specs; :func:`teamgraph.specs.loader.load_team`
    turns built-in names and partial overrides into full specs."""

    model_config = ConfigDict(extra="forbid")

    @property
    def searches(self) -> bool:
        """Whether one of its members (at any depth) has a tool to find documents."""
        return any(member.searches for member in self.members)

    name: str = Field(min_length=1)
    description: str = ""
    pattern: Pattern = "workflow"
    model: str | None = Field(
        default=None,
        description="Model of the team's roles and members (a nested team inherits it); "
        "unset: the default_model setting.",
    )
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    members: list[Member] = Field(min_length=1)
    knowledge: list[str] = Field(default_factory=list, description="Paths indexed for search_docs")
    collections: list[Annotated[str, Field(pattern=COLLECTION_NAME)]] = Field(
        default_factory=list,
        description="Named knowledge collections its search_docs reads besides its own "
        "documents (`teamgraph ingest --collection NAME`).",
    )
    embedding_model: str | None = Field(
        default=None,
        pattern=r"^(offline|none|[a-z_]+:\S+)$",
        description="Embeddings search_docs finds passages by meaning with: offline, "
        "openai:<model>, ollama:<model>, or none (keyword only); unset: the embedding_model "
        "setting.",
    )
    rerank: bool = Field(
        default=False,
        description="search_docs has the team's model order the passages it found (one more "
        "model call per search; never with the offline model).",
    )
    workflow: WorkflowOptions = Field(default_factory=WorkflowOptions)
    supervisor: SupervisorOptions = Field(default_factory=SupervisorOptions)
    swarm: SwarmOptions = Field(default_factory=SwarmOptions)
    collaborative: CollaborativeOptions = Field(default_factory=CollaborativeOptions)
    history_token_budget: int = Field(
        default=3000, ge=100, description="Earlier conversation an agent sees (approx. tokens)."
    )
    clarify: bool = Field(
        default=False, description="Ask the user a question first when a request is too vague."
    )
    retry: RetryOptions = Field(
        default_factory=RetryOptions, description="Retries of every model call of the run."
    )
    budget: Budget = Field(default_factory=Budget)
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

    @model_validator(mode="before")
    @classmethod
    def _retry_under_workflow(cls, data: Any) -> Any:
        """``workflow.retry`` (where retries were set before they applied to every pattern) is
        read as the team's ``retry``."""
        workflow = data.get("workflow") if isinstance(data, dict) else None
        if not isinstance(workflow, dict) or "retry" not in workflow:
            return data
        if "retry" in data:
            raise ValueError("retry is set twice: at the team's top level and under workflow")
        workflow = {k: v for k, v in workflow.items() if k != "retry"}
        return {**data, "workflow": workflow, "retry": data["workflow"]["retry"]}

    @field_validator("state_prompt")
    @classmethod
    def _state_prompt_placeholders(cls, value: str) -> str:
        missing = [p for p in ("{state}", "{msg}") if p not in value]
        if missing:
            raise ValueError(f"must contain {' and '.join(missing)}")
        return value

    @model_validator(mode="after")
    def _nested_teams_inherit_the_model(self) -> TeamSpec:
        _pass_model_down(self)
        return self

    @model_validator(mode="after")
    def _check_members(self) -> TeamSpec:
        names = [m.name for m in self.members]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"members: duplicate member name {dupes[0]!r}")
        known = ", ".join(names)
        for field, value in self._member_references():
            if value is not None and value not in names:
                raise ValueError(f"{field} {value!r} is not a member; members: {known}")
        for member in self.members:
            for target in getattr(member, "can_handoff_to", []):
                if target not in names:
                    others = [n for n in names if n != member.name]
                    raise ValueError(
                        f"members: {member.name!r} can_handoff_to unknown member {target!r}"
                        f"{_did_you_mean(target, others)}; it can hand off to: "
                        f"{', '.join(others) or 'no other member'}"
                    )
        return self

    def _member_references(self) -> list[tuple[str, str | None]]:
        roles = self.collaborative
        return [
            ("workflow.default_worker", self.workflow.default_worker),
            ("swarm.default_agent", self.swarm.default_agent),
            ("collaborative.planner", roles.planner),
            ("collaborative.researcher", roles.researcher),
            ("collaborative.writer", roles.writer),
            ("collaborative.reviewer", roles.reviewer),
        ]

    def member(self, name: str) -> AgentSpec | TeamSpec:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)

    @property
    def default_worker(self) -> str:
        return self.workflow.default_worker or self.members[0].name


def _member_kind(value: Any) -> str:
    if isinstance(value, TeamSpec) or (isinstance(value, dict) and "members" in value):
        return "team"
    return "agent"


def _pass_model_down(team: TeamSpec) -> None:
    """Nested teams that name no model use their parent's (all the way down)."""
    for member in team.members:
        if isinstance(member, TeamSpec) and member.model is None and team.model is not None:
            member.model, member.model_kwargs = team.model, dict(team.model_kwargs)
            _pass_model_down(member)


Member = Annotated[
    Annotated[AgentSpec, Tag("agent")] | Annotated[TeamSpec, Tag("team")],
    Discriminator(_member_kind),
]
TeamSpec.model_rebuild()


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
