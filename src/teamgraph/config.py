"""Settings from the environment (prefix ``TEAMGRAPH_``) or a ``.env`` file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from teamgraph.errors import UsageError

DEFAULT_TIMEOUT_S = 120.0


class ProviderSettings(BaseModel):
    """How teamgraph talks to one provider, or one provider's model (``providers`` setting,
    keyed ``openai``, ``anthropic``, ``ollama`` or ``provider:model``; a model's entry is merged
    over its provider's). Rates are shared by every process on the database (PostgreSQL) or of
    the process (SQLite); ``max_concurrency`` is per process."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(default=None, description="Endpoint (OpenAI-compatible, ...).")
    api_key: str | None = Field(
        default=None, repr=False, description="Key (else the provider's variable)."
    )
    streaming: bool | None = Field(default=None, description="Stream replies (default: yes).")
    timeout_s: float | None = Field(
        default=None, gt=0, description=f"Per-request timeout (default {DEFAULT_TIMEOUT_S:g})."
    )
    max_concurrency: int | None = Field(default=None, ge=1, description="Calls at once.")
    requests_per_minute: int | None = Field(default=None, ge=1, description="Request rate.")
    tokens_per_minute: int | None = Field(default=None, ge=1, description="Token rate.")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra arguments for the LangChain chat model."
    )

    def over(self, base: ProviderSettings) -> ProviderSettings:
        """These settings where set, ``base``'s elsewhere."""
        mine = self.model_dump(exclude_unset=True, exclude={"kwargs"})
        return base.model_copy(update={**mine, "kwargs": {**base.kwargs, **self.kwargs}})


EXAMPLES = Path(__file__).resolve().parent / "examples"  # shipped with the package
EXAMPLE_TEAMS = EXAMPLES / "teams"


class Settings(BaseSettings):
    """Every setting, with its environment variable in the field's alias."""

    model_config = SettingsConfigDict(env_prefix="TEAMGRAPH_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./teamgraph.db",
        validation_alias=AliasChoices("TEAMGRAPH_DATABASE_URL", "DATABASE_URL"),
        description="Where runs, checkpoints and the knowledge index live.",
    )
    default_model: str = Field(
        default="offline", description="Model for teams and agents that name none."
    )
    prices_file: Path | None = Field(
        default=None,
        description="YAML price table merged over the built-in one (USD per 1M tokens).",
    )
    templates_dirs: list[str] = Field(
        default_factory=list, description="Extra folders of workflow templates (YAML)."
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEAMGRAPH_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="Base URL of an OpenAI-compatible endpoint (vLLM, LM Studio, ...).",
    )
    openai_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEAMGRAPH_OPENAI_API_KEY", "OPENAI_API_KEY"),
        repr=False,
        description="Key for the OpenAI (or OpenAI-compatible) endpoint.",
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEAMGRAPH_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
        description="Base URL of the Anthropic Messages API (a proxy, a gateway, ...).",
    )
    anthropic_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEAMGRAPH_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
        repr=False,
        description="Key for the Anthropic API.",
    )
    ollama_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("TEAMGRAPH_OLLAMA_BASE_URL", "OLLAMA_HOST"),
        description="Where Ollama listens (default http://127.0.0.1:11434).",
    )
    providers: dict[str, ProviderSettings] = Field(
        default_factory=dict,
        description="Per provider or provider:model: endpoint, key, streaming, timeout and "
        "limits (JSON in the environment).",
    )
    token_frame_ms: float = Field(
        default=25.0,
        ge=0,
        description="Streamed text goes out as one token event per this many ms at most (the "
        "first piece at once; 0: one event per model chunk).",
    )
    token_frame_chars: int = Field(
        default=512,
        ge=1,
        description="A token event is sent as soon as it holds this many characters.",
    )

    db_pool_size: int = Field(
        default=20, ge=1, description="PostgreSQL connections each process keeps (docs/deploy.md)."
    )
    db_max_overflow: int = Field(
        default=20, ge=0, description="Extra PostgreSQL connections a process opens under load."
    )

    compact_runs: bool = Field(
        default=True,
        description="A run that completed keeps its latest checkpoint, events, step results, "
        "usage and cost, and drops older checkpoints and its journal (docs/deploy.md); false "
        "keeps everything, e.g. to inspect a graph's history.",
    )
    retention_days: float | None = Field(
        default=None,
        gt=0,
        description="The server removes runs that ended and have not changed for this many "
        "days, whole, as `teamgraph prune --older-than` does; unset: kept forever.",
    )
    retention_interval_s: float = Field(
        default=3600.0, ge=1, description="How often the server applies `retention_days`."
    )

    embedding_model: str = Field(
        default="offline",
        description="Embeddings of the knowledge index: offline (WordLlama, shipped with the "
        "package), offline:multilingual (teamgraph[multilingual]), openai:<model>, "
        "ollama:<model>, or none (keyword search only).",
    )
    embedding_min_similarity: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="Cosine similarity under which a passage found by meaning is dropped "
        "(unset: 0.15 for the offline models, 0 for a provider's).",
    )
    plan_cache: bool = Field(
        default=True,
        description="Reuse a plan the planner model made for a similar request of the same "
        "user and team (docs/concepts.md); false: every request is planned afresh.",
    )
    plan_cache_threshold: float = Field(
        default=0.9,
        ge=-1,
        le=1,
        description="Cosine similarity two requests need for the second to reuse the first's "
        "plan (a team's workflow.plan_cache.threshold overrides it).",
    )
    plan_cache_size: int = Field(
        default=200, ge=1, description="Cached plans kept per team and user (newest first)."
    )
    knowledge_path: Path = Field(
        default=Path("teamgraph-knowledge.db"),
        description="SQLite file of the knowledge index when DATABASE_URL is PostgreSQL.",
    )

    # --- HTTP service -----------------------------------------------------------------------
    jwt_secret: str = Field(
        default="",
        repr=False,
        description="Secret that signs login tokens (set it in production; empty: "
        "a random one per process, so tokens do not survive a restart).",
    )
    jwt_expiry_minutes: int = Field(default=24 * 60, ge=1, description="Token lifetime.")
    master_password: str = Field(
        default="",
        repr=False,
        description="Enables POST /api/v1/auth/reset-password (the seed's reset by master "
        "password); empty: the route answers 404.",
    )
    teams_dirs: list[str] = Field(
        default_factory=lambda: [str(EXAMPLE_TEAMS)],
        description="Folders of team YAML files served (default: the example teams shipped "
        "with the package).",
    )
    cors_origins: list[str] = Field(default_factory=list, description="Allowed CORS origins.")
    webhook_secret: str = Field(
        default="",
        repr=False,
        description="Key that signs the Agent Protocol's webhook calls (HMAC-SHA256); empty: "
        "runs with a webhook are refused.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of the reverse proxies whose X-Forwarded-For and "
        'X-Forwarded-Proto are believed (e.g. ["10.0.0.5"]; "*": any). Empty (the default): '
        "no proxy is trusted and the client address is the connection's own.",
    )
    max_concurrent_runs: int = Field(
        default=4, ge=1, description="Runs executing at once in the server (others queue)."
    )
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="Request body limit.")
    max_json_depth: int = Field(
        default=32,
        ge=4,
        le=200,
        description="How deep a JSON request body may nest (arrays, objects).",
    )

    # --- scale-out: API processes and worker processes on PostgreSQL (docs/deploy.md) ---------
    execute_runs: bool = Field(
        default=True,
        description="Execute runs in the API process (false, `serve --workers 0`: runs go to the "
        "queue and `teamgraph worker` processes execute them; needs PostgreSQL).",
    )
    worker_concurrency: int = Field(
        default=8, ge=1, description="Runs one worker executes at once."
    )
    lease_ttl_s: float = Field(
        default=10.0,
        ge=1,
        description="How long a worker's claim on a run lasts unrenewed (renewed every third of "
        "it): a run whose worker died is taken over once it has lapsed.",
    )
    worker_takeover_slots: int = Field(
        default=2,
        ge=1,
        description="Runs a worker can take over from dead workers beside its "
        "`worker_concurrency` (slots of their own: a full worker still takes orphans over).",
    )
    worker_heartbeat_s: float = Field(
        default=2.0,
        gt=0,
        description="How often a worker says it is alive and looks for stalled runs.",
    )
    worker_stalled_s: float = Field(
        default=10.0, gt=0, description="A worker silent this long is dead: its runs are retried."
    )
    worker_drain_s: float = Field(
        default=30.0,
        ge=0,
        description="On SIGTERM a worker stops claiming and waits this long for its runs; those "
        "still running are handed to another worker from their last checkpoint.",
    )
    otel_exporter: Literal["", "console", "otlp"] = Field(
        default="",
        description="OpenTelemetry traces of runs across API and worker processes: console "
        "(one JSON line per span on stdout) or otlp (OTEL_EXPORTER_OTLP_ENDPOINT); empty: off.",
    )
    worker_health_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of a worker's /health, /ready, /metrics (0: off).",
    )
    max_upload_bytes: int = Field(
        default=20_000_000, ge=1024, description="Body limit of a knowledge upload (a PDF, ...)."
    )
    rate_limits: dict[str, str] = Field(
        default_factory=lambda: {
            "chat": "30/minute",
            "stream": "20/minute",
            "register": "10/hour",
            "login": "20/minute",
        },
        description="Per-user and per-IP limits by route group.",
    )

    def provider(self, model: str) -> ProviderSettings:
        """The settings a ``provider:model`` is called with: the flat variables
        (``OPENAI_BASE_URL``, ...), then ``providers[provider]``, then
        ``providers[provider:model]``."""
        name = model.partition(":")[0]
        flat = {
            "openai": (self.openai_base_url, self.openai_api_key),
            "anthropic": (self.anthropic_base_url, self.anthropic_api_key),
            "ollama": (self.ollama_base_url, None),
        }.get(name, (None, None))
        merged = ProviderSettings(base_url=flat[0], api_key=flat[1])
        for key in (name, model):
            if key in self.providers:
                merged = self.providers[key].over(merged)
        return merged

    def require_postgres(self, what: str) -> None:
        """Refuse ``what`` (a role that shares runs between processes) on SQLite."""
        if not self.is_postgres:
            raise UsageError(f"{what} needs PostgreSQL: set DATABASE_URL=postgresql://…")

    @property
    def is_postgres(self) -> bool:
        return self.database_url.startswith(("postgresql://", "postgres://", "postgresql+"))

    @property
    def postgres_url(self) -> str:
        """The URL in the plain ``postgresql://`` form psycopg and LangGraph expect."""
        url = self.database_url
        for prefix in ("postgresql+psycopg://", "postgresql+asyncpg://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql://" + url.removeprefix(prefix)
        return url

    @property
    def sqlite_path(self) -> Path:
        """The SQLite file named by ``database_url``, in a directory that exists: a mistyped
        path is refused rather than its directories created (the file itself is created on
        first use)."""
        url = self.database_url
        for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
            if url.startswith(prefix):
                path = Path(url.removeprefix(prefix))
                if not path.parent.is_dir():
                    raise UsageError(
                        f"the database's directory {path.parent} does not exist: create it, or "
                        "choose another database with --db or DATABASE_URL"
                    )
                return path
        raise UsageError(
            f"database URL {url!r} is not supported: use sqlite:///PATH or postgresql://HOST/DB"
        )
