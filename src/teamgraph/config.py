"""Settings from the environment (prefix ``TEAMGRAPH_``) or a ``.env`` file."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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
        description="Key for the OpenAI (or OpenAI-compatible) endpoint.",
    )

    knowledge_path: Path = Field(
        default=Path("teamgraph-knowledge.db"),
        description="SQLite file of the knowledge index when DATABASE_URL is PostgreSQL.",
    )

    # --- HTTP service -----------------------------------------------------------------------
    jwt_secret: str = Field(
        default="",
        description="Secret that signs login tokens (set it in production; empty: "
        "a random one per process, so tokens do not survive a restart).",
    )
    jwt_expiry_minutes: int = Field(default=24 * 60, ge=1, description="Token lifetime.")
    teams_dirs: list[str] = Field(
        default_factory=lambda: ["examples/teams"], description="Folders of team YAML files served."
    )
    cors_origins: list[str] = Field(default_factory=list, description="Allowed CORS origins.")
    max_concurrent_runs: int = Field(
        default=4, ge=1, description="Runs executing at once in the server (others queue)."
    )
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="Request body limit.")
    rate_limits: dict[str, str] = Field(
        default_factory=lambda: {
            "chat": "30/minute",
            "stream": "20/minute",
            "register": "10/hour",
            "login": "20/minute",
        },
        description="Per-user and per-IP limits by route group.",
    )

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
        """The SQLite file named by ``database_url`` (only SQLite is supported so far)."""
        url = self.database_url
        for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
            if url.startswith(prefix):
                return Path(url.removeprefix(prefix))
        raise ValueError(f"DATABASE_URL {url!r}: use sqlite:///PATH or postgresql://...")
