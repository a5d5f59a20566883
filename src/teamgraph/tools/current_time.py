"""``current_time``: the current date and time in an IANA timezone (``zoneinfo``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools._http import ERROR_HANDLING

DESCRIPTION = (
    "Current date and time now in a timezone (an IANA name such as Region/City, or UTC): the "
    "date today, clock time, day of the week and UTC offset."
)
_UTC_ALIASES = {"", "utc", "gmt", "z", "zulu", "universal"}


class CurrentTimeInput(BaseModel):
    """Arguments of the ``current_time`` tool."""

    timezone: str = Field(
        default="UTC",
        description="IANA timezone name such as 'Europe/Paris' or 'UTC' (a zone's city, "
        "e.g. 'Tokyo', also works).",
    )


def zone(name: str) -> ZoneInfo:
    """The ``ZoneInfo`` called ``name``: an IANA key, ``UTC``/``GMT`` in any case, or the city
    part of a key (``"new york"`` → ``America/New_York``); a clear error otherwise."""
    name = name.strip()
    if name.lower() in _UTC_ALIASES:
        return ZoneInfo("UTC")
    with contextlib.suppress(ZoneInfoNotFoundError, ValueError, OSError):
        return ZoneInfo(name)
    city = "/" + name.lower().replace(" ", "_")
    keys = sorted(key for key in available_timezones() if key.lower().endswith(city))
    if keys:
        return ZoneInfo(keys[0])
    raise ToolException(
        f"unknown timezone {name!r}: use an IANA name such as 'Europe/Paris', "
        "'America/New_York' or 'UTC'"
    )


def make_current_time_tool(clock: Callable[[], datetime] | None = None) -> BaseTool:
    """Build ``current_time``; ``clock`` (an aware-datetime source) is for tests."""
    now = clock or (lambda: datetime.now(UTC))

    def current_time(timezone: str = "UTC") -> str:
        tz = zone(timezone)
        local = now().astimezone(tz)
        return f"{local.isoformat(timespec='seconds')} ({tz.key}, {local:%A}, {local.tzname()})"

    async def acurrent_time(timezone: str = "UTC") -> str:
        return current_time(timezone)

    return StructuredTool.from_function(
        current_time,
        acurrent_time,
        "current_time",
        DESCRIPTION,
        args_schema=CurrentTimeInput,
        **ERROR_HANDLING,
    )
