"""Request and response bodies (pydantic, documented in the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, EmailStr, Field, field_validator

from teamgraph.server.security import password_problems


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

    name: str = Field(default="", max_length=200)
    team: str | None = Field(default=None, description="Team name (default: the first served).")
    template: str | None = Field(default=None, max_length=200)


class SessionOut(BaseModel):
    session_id: str
    name: str
    team: str
    template: str | None = None
    token: Token | None = Field(default=None, description="A session token for the chat routes.")
    created_at: datetime | None = None


class SessionRename(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class TeamOut(BaseModel):
    name: str
    description: str
    pattern: str
    members: list[dict[str, Any]]


class TemplateOut(BaseModel):
    name: str
    description: str
