"""Time tools: the time anywhere, converting a time between zones, days until a date."""

from __future__ import annotations

from datetime import date as Date
from datetime import datetime, tzinfo

from workers.tool_registry.context import runtime
from workers.tool_registry.registry import ToolReply, tool
from workers.tools.builtin.spoken_time import (
    local_zone,
    parse_clock,
    parse_date,
    resolve_timezone,
    zone_name,
)

__all__ = ["convert_time", "days_until", "get_current_time"]


def _zone(name: str) -> tzinfo:
    """The named zone, or the configured local one when ``name`` is empty."""
    return resolve_timezone(name) if name.strip() else local_zone(runtime().settings.tools.timezone)


def place_name(zone: tzinfo) -> str:
    """The zone as a person names it: "Tokyo" for Asia/Tokyo, "New York", "UTC"."""
    return zone_name(zone).rsplit("/", 1)[-1].replace("_", " ")


def say_clock(moment: datetime) -> str:
    """A time of day as it is said: "10:35 in the morning", "noon", "9 at night"."""
    hour = moment.hour % 12 or 12
    if moment.minute == 0 and moment.hour in (0, 12):
        return "midnight" if moment.hour == 0 else "noon"
    clock = f"{hour}:{moment:%M}" if moment.minute else f"{hour} o'clock"
    part = ("at night" if moment.hour < 5 or moment.hour >= 21 else "in the morning"
            if moment.hour < 12 else "in the afternoon" if moment.hour < 18 else "in the evening")
    return f"{clock} {part}"


@tool(
    examples=(
        "what time is it",
        "what's the time",
        "what time is it in {timezone}",
        "what is the time in {timezone}",
    )
)
def get_current_time(timezone: str = "") -> ToolReply:
    """Get the current local date and time in a timezone.

    Args:
        timezone: An IANA timezone name such as "Europe/Paris", a major city, or "UTC";
            empty for the assistant's own timezone.
    """
    zone = _zone(timezone)
    now = datetime.now(zone)
    hour = now.hour % 12 or 12
    data = (f"It's {hour}:{now:%M} {'AM' if now.hour < 12 else 'PM'} on {now:%A}, "
            f"{now:%B} {now.day}, {now.year} ({zone_name(zone)} time, UTC{now:%z}).")
    where = f" in {place_name(zone)}" if timezone.strip() else ""
    return ToolReply(data=data, say=f"It's {say_clock(now)}{where}.")


@tool(
    examples=(
        "what is {time} {from_timezone} in {to_timezone}",
        "convert {time} from {from_timezone} to {to_timezone}",
        "what time is {time} {from_timezone} in {to_timezone}",
    )
)
def convert_time(time: str, from_timezone: str, to_timezone: str) -> str:
    """Convert a time of day today from one timezone to another.

    Args:
        time: A time of day such as "15:30", "3 pm" or "noon".
        from_timezone: Where that time is: an IANA name or a major city; empty for local time.
        to_timezone: The timezone to convert to: an IANA name or a major city.
    """
    clock = parse_clock(time)
    if clock is None:
        raise ValueError(f"could not understand the time {time!r}; say e.g. '15:30' or '3 pm'")
    source, target = _zone(from_timezone), _zone(to_timezone)
    moment = datetime.combine(datetime.now(source).date(), clock, source)
    there = moment.astimezone(target)
    days = (there.date() - moment.date()).days
    day = {0: "", 1: " the next day", -1: " the day before"}.get(days, "")
    return f"{moment:%H:%M} in {zone_name(source)} is {there:%H:%M}{day} in {zone_name(target)}."


@tool(examples=("how many days until {date}", "how long until {date}", "how many days to {date}"))
def days_until(date: str) -> str:
    """Count the days from today until a date.

    Args:
        date: A date such as "2026-12-25", "December 25", "Christmas" or "Friday".
    """
    today = datetime.now(local_zone(runtime().settings.tools.timezone)).date()
    target = parse_date(date, today)
    if target is None:
        raise ValueError(
            f"could not understand the date {date!r}; say e.g. 'December 25', "
            "'2026-12-25' or 'Friday'"
        )
    days = (target - today).days
    named = _spoken(target)
    if days == 0:
        return f"{named} is today."
    if days < 0:
        return f"{named} was {-days} day{'' if days == -1 else 's'} ago."
    return (
        f"There {'is' if days == 1 else 'are'} {days} day{'' if days == 1 else 's'} until {named}."
    )


def _spoken(day: Date) -> str:
    return f"{day:%A} {day.day} {day:%B %Y}"
