"""Time tools."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from workers.tools.registry import tool

__all__ = ["get_current_time"]

# Cities people name that are not IANA zone names.
_ALIASES = {
    "utc": "UTC", "gmt": "UTC", "london": "Europe/London", "paris": "Europe/Paris",
    "berlin": "Europe/Berlin", "tokyo": "Asia/Tokyo", "new york": "America/New_York",
    "los angeles": "America/Los_Angeles", "sydney": "Australia/Sydney",
    "lisbon": "Europe/Lisbon", "boston": "America/New_York", "madrid": "Europe/Madrid",
    "rome": "Europe/Rome", "beijing": "Asia/Shanghai", "delhi": "Asia/Kolkata",
    "moscow": "Europe/Moscow", "chicago": "America/Chicago", "toronto": "America/Toronto",
}


def resolve_timezone(name: str) -> ZoneInfo:
    """An IANA zone from a zone name or a well-known city; ValueError naming what is valid."""
    key = name.strip()
    alias = _ALIASES.get(key.lower())
    if alias:
        return ZoneInfo(alias)
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    wanted = key.lower().replace(" ", "_")
    for zone in available_timezones():
        if zone.lower().rsplit("/", 1)[-1] == wanted:
            return ZoneInfo(zone)
    raise ValueError(f"unknown timezone {name!r}; use an IANA name such as 'Europe/Paris' or "
                     "'America/New_York', or 'UTC'")


@tool(examples=("what time is it", "what time is it in {timezone}"))
def get_current_time(timezone: str = "UTC") -> str:
    """Get the current local date and time in a timezone.

    Args:
        timezone: An IANA timezone name such as "Europe/Paris", a major city, or "UTC".
    """
    zone = resolve_timezone(timezone)
    now = datetime.now(zone)
    return f"{now:%H:%M} on {now:%A %d %B %Y} ({zone.key}, UTC{now:%z})"
