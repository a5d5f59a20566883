"""``weather``: current conditions and a 3-day forecast from Open-Meteo (no API key needed)."""

from __future__ import annotations

from typing import Any

import httpx
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from teamgraph.tools._http import get_json, guarded, http_client, online_tool

GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
FORECAST_URL = "https://api.open-meteo.com/v1/forecast"
DESCRIPTION = (
    "Current weather today, tomorrow and the next days for a city or place: temperature (hot "
    "or cold), rain, snow, wind, humidity, clouds or sun, as a 3-day forecast. Give the place "
    "name, optionally with its country, e.g. 'Paris' or 'Paris, France'."
)
CURRENT = "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code"
DAILY = "weather_code,temperature_2m_max,temperature_2m_min"
# WMO weather interpretation codes, as documented by Open-Meteo
WMO_CODES = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog",
    48: "depositing rime fog", 51: "light drizzle", 53: "moderate drizzle", 55: "dense drizzle",
    56: "light freezing drizzle", 57: "dense freezing drizzle", 61: "slight rain",
    63: "moderate rain", 65: "heavy rain", 66: "light freezing rain", 67: "heavy freezing rain",
    71: "slight snow fall", 73: "moderate snow fall", 75: "heavy snow fall", 77: "snow grains",
    80: "slight rain showers", 81: "moderate rain showers", 82: "violent rain showers",
    85: "slight snow showers", 86: "heavy snow showers", 95: "thunderstorm",
    96: "thunderstorm with slight hail", 99: "thunderstorm with heavy hail",
}  # fmt: skip


class WeatherInput(BaseModel):
    """Arguments of the ``weather`` tool."""

    location: str = Field(description="City or place name, e.g. 'Lyon' or 'Springfield, US'.")


def describe_code(code: Any) -> str:
    """Words for a WMO weather code (``"weather code 42"`` when unknown)."""
    return WMO_CODES.get(int(code), f"weather code {code}") if code is not None else "unknown"


def make_weather_tool(
    transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 10
) -> BaseTool:
    """Build ``weather``; ``transport`` replaces the network (tests use ``MockTransport``)."""

    async def weather(location: str) -> str:
        if not location.strip():
            raise ToolException("give a city or place name")
        async with http_client(transport, timeout_s) as client:
            return await guarded(_weather(client, location), timeout_s, "Open-Meteo")

    return online_tool("weather", DESCRIPTION, WeatherInput, weather)


async def _weather(client: httpx.AsyncClient, location: str) -> str:
    place = await _geocode(client, location)
    params = {"latitude": place["latitude"], "longitude": place["longitude"]}
    params |= {"current": CURRENT, "daily": DAILY, "forecast_days": 3, "timezone": "auto"}
    return format_weather(place, await get_json(client, FORECAST_URL, params))


async def _geocode(client: httpx.AsyncClient, location: str) -> dict[str, Any]:
    """The best place for ``location``; ``"Paris, France"`` searches Paris, prefers France."""
    name, _, hint = (part.strip() for part in location.partition(","))
    params = {"name": name, "count": 10 if hint else 1, "language": "en", "format": "json"}
    places: list[dict[str, Any]] = (await get_json(client, GEOCODING_URL, params)).get("results")
    if not places:
        raise ToolException(f"unknown place {location!r}: no location matches that name")
    wanted = hint.lower()
    fields = ("country", "country_code", "admin1")
    matching = [p for p in places if any(str(p.get(f, "")).lower() == wanted for f in fields)]
    return (matching or places)[0]


def format_weather(place: dict[str, Any], data: dict[str, Any]) -> str:
    """Readable weather report from Open-Meteo's geocoding and forecast answers."""
    where = ", ".join(str(place[k]) for k in ("name", "admin1", "country") if place.get(k))
    now, units = data["current"], data.get("current_units", {})
    lines = [
        f"Weather for {where} (lat {place['latitude']:.2f}, lon {place['longitude']:.2f}), "
        f"local time {now.get('time', '?')}:",
        f"now: {describe_code(now.get('weather_code'))}, "
        f"{now['temperature_2m']} {units.get('temperature_2m', '°C')}, "
        f"humidity {now.get('relative_humidity_2m', '?')} %, "
        f"wind {now.get('wind_speed_10m', '?')} {units.get('wind_speed_10m', 'km/h')}",
    ]
    daily, unit = data.get("daily", {}), data.get("daily_units", {}).get("temperature_2m_max", "°C")
    for day, code, high, low in zip(
        daily.get("time", []),
        daily.get("weather_code", []),
        daily.get("temperature_2m_max", []),
        daily.get("temperature_2m_min", []),
        strict=False,
    ):
        lines.append(f"{day}: {describe_code(code)}, {low} to {high} {unit}")
    return "\n".join(lines)
