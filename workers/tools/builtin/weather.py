"""Weather now and the forecast, from Open-Meteo (no API key): geocode, then forecast."""

from __future__ import annotations

import contextlib
from datetime import date
from typing import Any

from voxqueue.settings import Settings
from workers.tool_registry.context import runtime
from workers.tool_registry.net import host_of, safe_get
from workers.tool_registry.registry import tool

__all__ = ["get_forecast", "get_weather"]

# WMO weather interpretation codes, as Open-Meteo documents them.
_WMO = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "foggy",
    48: "foggy with rime",
    51: "light drizzle",
    53: "drizzle",
    55: "heavy drizzle",
    56: "light freezing drizzle",
    57: "freezing drizzle",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "freezing rain",
    71: "light snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "light showers",
    81: "showers",
    82: "violent showers",
    85: "light snow showers",
    86: "heavy snow showers",
    95: "thunderstorms",
    96: "thunderstorms with hail",
    99: "thunderstorms with heavy hail",
}
_CURRENT = "temperature_2m,apparent_temperature,relative_humidity_2m,weather_code,wind_speed_10m"
_DAILY = "weather_code,temperature_2m_max,temperature_2m_min,precipitation_probability_max"


def _get_json(url: str, settings: Settings, params: dict[str, Any], what: str) -> Any:
    result = safe_get(url, settings, params=params, allow=[host_of(url)])
    if not result.ok:
        reason = ""
        with contextlib.suppress(ValueError, AttributeError):
            reason = str(result.json().get("reason", ""))
        raise RuntimeError(
            f"the {what} service answered HTTP {result.status}" + (f": {reason}" if reason else "")
        )
    try:
        return result.json()
    except ValueError:
        raise RuntimeError(f"the {what} service sent an answer that is not JSON") from None


def _place(location: str, settings: Settings) -> tuple[str, float, float]:
    """(spoken name, latitude, longitude) of the best match for ``location``."""
    name, _, qualifier = location.partition(",")
    if not name.strip():
        raise ValueError("say which place, such as 'Paris' or 'Austin, Texas'")
    found = (
        _get_json(
            settings.tools.weather_geocoding_url,
            settings,
            {"name": name.strip(), "count": 10, "language": "en", "format": "json"},
            "geocoding",
        ).get("results")
        or []
    )
    if not found:
        raise ValueError(f"I could not find a place called {location!r}")
    wanted = qualifier.strip().lower()
    if wanted:
        found = [
            p
            for p in found
            if wanted
            in (
                str(p.get("country", "")).lower(),
                str(p.get("admin1", "")).lower(),
                str(p.get("country_code", "")).lower(),
            )
        ] or found
    best = found[0]
    label = ", ".join(str(best[k]) for k in ("name", "country") if best.get(k))
    return label, float(best["latitude"]), float(best["longitude"])


def _degrees(value: Any) -> str:
    return f"{round(float(value))} degrees"


@tool(
    examples=(
        "what is the weather in {location}",
        "what's the weather like in {location}",
        "weather in {location}",
        "how warm is it in {location}",
    ),
    service="the weather service",
)
def get_weather(location: str) -> str:
    """Get the current weather in a place.

    Args:
        location: A city or place name, optionally with its country, such as "Paris, France".
    """
    s = runtime().settings
    label, lat, lon = _place(location, s)
    data = _get_json(
        s.tools.weather_forecast_url,
        s,
        {"latitude": lat, "longitude": lon, "current": _CURRENT, "timezone": "auto"},
        "weather",
    )
    now = data.get("current") or {}
    if "temperature_2m" not in now:
        raise RuntimeError("the weather service sent no current conditions")
    sky = _WMO.get(int(now.get("weather_code", -1)), "unknown conditions")
    text = f"In {label} it is {_degrees(now['temperature_2m'])} and {sky}"
    if now.get("apparent_temperature") is not None:
        text += f", feeling like {_degrees(now['apparent_temperature'])}"
    extras = []
    if now.get("wind_speed_10m") is not None:
        unit = (data.get("current_units") or {}).get("wind_speed_10m", "km/h")
        extras.append(f"wind {round(float(now['wind_speed_10m']))} {unit}")
    if now.get("relative_humidity_2m") is not None:
        extras.append(f"humidity {round(float(now['relative_humidity_2m']))}%")
    return text + (f", {' and '.join(extras)}" if extras else "") + "."


@tool(
    examples=(
        "what is the forecast for {location}",
        "weather forecast for {location}",
        "what will the weather be in {location} for the next {days} days",
    ),
    service="the weather service",
)
def get_forecast(location: str, days: int = 3) -> str:
    """Get the daily weather forecast for a place.

    Args:
        location: A city or place name, optionally with its country, such as "Paris, France".
        days: How many days, from today (1 to 16).
    """
    if not 1 <= days <= 16:
        raise ValueError("days must be between 1 and 16")
    s = runtime().settings
    label, lat, lon = _place(location, s)
    data = _get_json(
        s.tools.weather_forecast_url,
        s,
        {
            "latitude": lat,
            "longitude": lon,
            "daily": _DAILY,
            "timezone": "auto",
            "forecast_days": days,
        },
        "weather",
    )
    daily = data.get("daily") or {}
    dates = daily.get("time") or []
    if not dates:
        raise RuntimeError("the weather service sent no forecast")
    parts = []
    for i, day in enumerate(dates[:days]):

        def at(field: str, index: int = i) -> Any:
            values = daily.get(field) or []
            return values[index] if index < len(values) else None

        when = "today" if i == 0 else "tomorrow" if i == 1 else f"{date.fromisoformat(day):%A}"
        sky = _WMO.get(
            int(at("weather_code") if at("weather_code") is not None else -1), "unknown conditions"
        )
        part = f"{when} {sky}"
        if at("temperature_2m_min") is not None and at("temperature_2m_max") is not None:
            low, high = (
                round(float(at("temperature_2m_min"))),
                round(float(at("temperature_2m_max"))),
            )
            part += f", {low} to {high} degrees"
        if at("precipitation_probability_max") is not None:
            part += f", {round(float(at('precipitation_probability_max')))}% chance of rain"
        parts.append(part)
    return f"Forecast for {label}: " + "; ".join(parts) + "."
