"""Request and response bodies of the core routes (accounts, sessions, teams), and the text
rules every dialect's bodies share (pydantic, documented in the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    ValidationInfo,
    field_validator,
)

from teamgraph.server.credentials import password_problems


def no_nul(value: str) -> str:
    """PostgreSQL cannot store NUL characters in text: refuse them at the edge."""
    if "\x00" in value:
        raise ValueError("must not contain NUL bytes")
    return value


SafeText = Annotated[str, AfterValidator(no_nul)]


class Credentials(BaseModel):
    email: EmailStr
    password: str = Field(min_length=1, max_length=200)

    @field_validator("password")
    @classmethod
    def _strong(cls, value: str) -> str:
        problems = password_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class Token(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: datetime


class UserOut(BaseModel):
    id: str
    email: str
    token: Token


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: SafeText = Field(default="", max_length=200)
    team: SafeText | None = Field(
        default=None, description="Team name (default: the first served)."
    )
    template: SafeText | None = Field(default=None, max_length=200)


class SessionOut(BaseModel):
    session_id: str
    name: str
    team: str
    template: str | None = None
    token: Token | None = Field(default=None, description="A session token for the chat routes.")
    created_at: datetime | None = None


class SessionRename(BaseModel):
    name: SafeText = Field(min_length=1, max_length=200)


class TeamOut(BaseModel):
    name: str
    description: str
    pattern: str
    members: list[dict[str, Any]]
    budget: dict[str, float | int] | None = Field(
        default=None, description="The team's per-run limits (max_tokens, max_usd, ...), if any."
    )


class MessageOut(BaseModel):
    role: str
    content: str
    run_id: str | None = Field(default=None, description="The run the message belongs to.")
    created_at: datetime


class TemplateOut(BaseModel):
    name: str
    description: str


MAX_USER_CHARS = 3000
MAX_HISTORY_CHARS = 200_000  # one message of a re-sent history (the body limit bounds the rest)


class ChatMessage(BaseModel):
    """A chat message as the compatibility chats' clients send it. What the user writes is
    1–3000 characters, with no script tag and no NUL; the assistant's and system's messages a
    client sends back with the history are taken as they are (an answer may be long, or show
    code)."""

    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_HISTORY_CHARS)

    @field_validator("content")
    @classmethod
    def _user_text(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("role") != "user":
            return value
        if not value:
            raise ValueError("String should have at least 1 character")
        if len(value) > MAX_USER_CHARS:
            raise ValueError(f"String should have at most {MAX_USER_CHARS} characters")
        if "<script" in value.lower():
            raise ValueError("content must not contain script tags")
        if "\x00" in value:
            raise ValueError("content must not contain NUL bytes")
        return value
