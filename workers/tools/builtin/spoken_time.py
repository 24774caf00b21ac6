"""Durations, times and dates as people say them: "five minutes", "tomorrow at 9", "May 3rd".

Numbers may be words (see :mod:`~workers.intents.words_to_numbers`). Every parser raises ValueError
with an example of what it understands, so the model (or the person) can rephrase.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from dateutil import parser as dateparser

from workers.intents.words_to_numbers import words_to_numbers

MAX_DURATION_S = 366 * 24 * 3600

# Cities people name that are not IANA zone names.
_ALIASES = {
    "utc": "UTC",
    "gmt": "UTC",
    "london": "Europe/London",
    "paris": "Europe/Paris",
    "berlin": "Europe/Berlin",
    "tokyo": "Asia/Tokyo",
    "new york": "America/New_York",
    "los angeles": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "sydney": "Australia/Sydney",
    "lisbon": "Europe/Lisbon",
    "boston": "America/New_York",
    "madrid": "Europe/Madrid",
    "rome": "Europe/Rome",
    "beijing": "Asia/Shanghai",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "moscow": "Europe/Moscow",
    "chicago": "America/Chicago",
    "toronto": "America/Toronto",
    "washington": "America/New_York",
    "seattle": "America/Los_Angeles",
    "hong kong": "Asia/Hong_Kong",
    "seoul": "Asia/Seoul",
    "dubai": "Asia/Dubai",
    "singapore": "Asia/Singapore",
    "mexico city": "America/Mexico_City",
}
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_UNIT_NAMES = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b")
_NUM = r"\d+(?:\.\d+)?"
_PAIR = re.compile(rf"({_NUM})\s*([a-z]+)")
_FILLER = re.compile(r"\b(and|for|in|of|a|an|about|the|timer|from now|later)\b|[,+]")
_CLOCK = re.compile(r"^(\d{1,2})(?:[:.h\s](\d{2}))?\s*(am|pm|a\.m\.?|p\.m\.?)?(?:\s*o'?\s?clock)?$")
_HOLIDAYS = {
    "christmas": (12, 25),
    "christmas day": (12, 25),
    "christmas eve": (12, 24),
    "new year": (1, 1),
    "new years": (1, 1),
    "new year's day": (1, 1),
    "new years day": (1, 1),
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
}


# -- zones -----------------------------------------------------------------------------------
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
    for zone in sorted(available_timezones()):
        if zone.lower() == wanted or zone.lower().rsplit("/", 1)[-1] == wanted:
            return ZoneInfo(zone)
    raise ValueError(
        f"unknown timezone {name!r}; use an IANA name such as 'Europe/Paris' or "
        "'America/New_York', a major city, or 'UTC'"
    )


def local_zone(configured: str = "") -> tzinfo:
    """The configured zone (``VOXQUEUE_TIMEZONE``), else the machine's local one."""
    if configured.strip():
        return resolve_timezone(configured)
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or zone.tzname(None) or str(zone)


# -- durations -------------------------------------------------------------------------------
def parse_duration(text: str) -> float:
    """Seconds in "5 minutes", "five minutes", "1 hour 30 minutes", "90 seconds", "1h30m",
    "an hour and a half", "half an hour"; ValueError otherwise."""
    spoken = text
    t = " " + text.lower().replace("-", " ") + " "
    t = re.sub(r"\bhalf (?:an? )?hour\b", "30 minutes", t)
    t = re.sub(r"\b(?:an? )?quarter (?:of )?(?:an? )?hour\b", "15 minutes", t)
    t = re.sub(r"\bhalf (?:an? )?minute\b", "30 seconds", t)
    t = words_to_numbers(t)
    t = re.sub(rf"({_NUM}) and a half ([a-z]+)", lambda m: f"{float(m[1]) + 0.5:g} {m[2]}", t)
    t = re.sub(rf"({_NUM}) ([a-z]+) and a half\b", lambda m: f"{float(m[1]) + 0.5:g} {m[2]}", t)
    total = 0.0
    found = False

    def take(match: re.Match[str]) -> str:
        nonlocal total, found
        unit = match[2]
        if unit not in _UNIT_SECONDS:
            return match[0]
        total += float(match[1]) * _UNIT_SECONDS[unit]
        found = True
        return " "

    rest = _PAIR.sub(take, t)
    rest = _FILLER.sub(" ", rest).strip()
    if not found or rest:
        raise ValueError(
            f"could not understand the duration {spoken!r}; say for example "
            "'5 minutes', '1 hour 30 minutes' or '90 seconds'"
        )
    if total <= 0:
        raise ValueError("the duration must be longer than zero")
    if total > MAX_DURATION_S:
        raise ValueError("the duration must be at most a year")
    return total


def describe_duration(seconds: float) -> str:
    """ "1 hour 30 minutes", "45 seconds", "2 days 3 hours" (whole seconds)."""
    left = round(seconds)
    parts: list[str] = []
    for size, name in _UNIT_NAMES:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts) or "0 seconds"


# -- moments ---------------------------------------------------------------------------------
def parse_when(text: str, now: datetime) -> datetime:
    """The moment meant by "in 10 minutes", "at 18:30", "at 6 pm", "tomorrow at 9",
    "tonight at 8", "on Friday at noon", "May 3 at 10", "2026-05-03 10:00"; in ``now``'s zone.

    A bare time that already passed today means tomorrow (or this evening: "at 3" said at 14:00
    is 15:00). ValueError when it cannot be understood or is not in the future.
    """
    spoken = text
    t = words_to_numbers(text.lower()).strip().rstrip(".?! ")
    t = re.sub(r"\s+", " ", t)
    stripped = re.sub(r"^(in|after)\s+|\s+(from now|later)$", "", t)
    if stripped != t or _PAIR.match(stripped) or stripped.startswith(("half", "quarter")):
        try:
            return now + timedelta(seconds=parse_duration(stripped))
        except ValueError:
            if stripped != t:
                raise
    try:
        iso = datetime.fromisoformat(t)
    except ValueError:
        pass
    else:
        return _future(iso if iso.tzinfo else iso.replace(tzinfo=now.tzinfo), now, spoken)
    day, rest, evening = _day_part(t, now)
    clock = parse_clock(rest, evening) if rest else None
    if rest and clock is None:
        day_from_date = _date_part(rest, now)
        if day_from_date is None:
            raise ValueError(
                f"could not understand the time {spoken!r}; say for example "
                "'in 10 minutes', 'at 18:30', 'at 6 pm' or 'tomorrow at 9'"
            )
        day, clock = day_from_date
    if day is None:
        if clock is None:
            raise ValueError(f"could not understand the time {spoken!r}")
        when = datetime.combine(now.date(), clock, now.tzinfo)
        if when <= now and clock.hour < 12 and not re.search(r"am|a\.m|pm|p\.m", rest):
            when += timedelta(hours=12)
        if when <= now:
            when = datetime.combine(now.date() + timedelta(days=1), clock, now.tzinfo)
        return when
    when = datetime.combine(day, clock or time(9, 0), now.tzinfo)
    return _future(when, now, spoken)


def _future(when: datetime, now: datetime, spoken: str) -> datetime:
    if when <= now:
        raise ValueError(f"{spoken!r} is in the past; say a time in the future")
    return when


def _day_part(t: str, now: datetime) -> tuple[date | None, str, bool]:
    """The day named in ``t`` (today, tomorrow, a weekday...), what is left, and whether an
    evening/afternoon was meant (so "8" means 20:00)."""
    evening = bool(re.search(r"\b(tonight|evening|afternoon|night)\b", t))
    day: date | None = None
    if re.search(r"\bday after tomorrow\b", t):
        day = now.date() + timedelta(days=2)
        t = t.replace("day after tomorrow", " ")
    elif re.search(r"\btomorrow\b", t):
        day = now.date() + timedelta(days=1)
    elif re.search(r"\b(today|tonight|this (morning|afternoon|evening))\b", t):
        day = now.date()
    else:
        for index, name in enumerate(_WEEKDAYS):
            if re.search(rf"\b{name}\b", t):
                ahead = (index - now.weekday()) % 7 or 7
                day = now.date() + timedelta(days=ahead)
                break
    rest = re.sub(
        r"\b(the day after tomorrow|tomorrow|today|tonight|this|next|on|in the|"
        r"morning|afternoon|evening|night|" + "|".join(_WEEKDAYS) + r")\b",
        " ",
        t,
    )
    return day, " ".join(rest.split()), evening


def parse_clock(text: str, evening: bool = False) -> time | None:
    """A time of day from "18:30", "6 pm", "9 30", "noon", "half past 3", or None."""
    t = re.sub(r"^at\s+", "", text.strip())
    if t in ("noon", "midday", "12 noon"):
        return time(12, 0)
    if t == "midnight":
        return time(0, 0)
    past = re.fullmatch(r"(half|quarter|\d{1,2}) (past|to) (\d{1,2})(?: ?(am|pm))?", t)
    if past:
        minutes = {"half": 30, "quarter": 15}.get(past[1]) or int(past[1])
        hour = int(past[3]) + (12 if past[4] == "pm" or (evening and int(past[3]) < 12) else 0)
        moment = datetime(2000, 1, 1, hour % 24) + timedelta(
            minutes=minutes if past[2] == "past" else -minutes
        )
        return moment.time()
    match = _CLOCK.fullmatch(t)
    if not match:
        return None
    hour, minute = int(match[1]), int(match[2] or 0)
    suffix = (match[3] or "").replace(".", "")
    if hour > 23 or minute > 59 or (suffix and not 1 <= hour <= 12):
        return None
    if suffix == "pm" and hour < 12:
        hour += 12
    elif suffix == "am" and hour == 12:
        hour = 0
    elif not suffix and evening and hour < 12:
        hour += 12
    return time(hour, minute)


def _date_part(text: str, now: datetime) -> tuple[date, time | None] | None:
    """A calendar date, maybe with a time: "may 3", "3rd of may at 10", "2026-05-03"."""
    clock: time | None = None
    head, sep, tail = f" {text} ".partition(" at ")
    if sep:
        clock = parse_clock(tail, False)
        if clock is None:
            return None
        text = head
    day = parse_date(text, now.date())
    return (day, clock) if day is not None else None


def parse_date(text: str, today: date) -> date | None:
    """A date from "christmas", "friday", "tomorrow", "December 25", "25th of december",
    "2026-12-25" (the next one when no year is said); None when not understood."""
    t = words_to_numbers(text.lower()).strip().rstrip(".?! ")
    t = " ".join(re.sub(r"^(on|the|next|this)\s+", "", t).split())
    if t in _HOLIDAYS:
        month, day = _HOLIDAYS[t]
        found = date(today.year, month, day)
        return found if found >= today else date(today.year + 1, month, day)
    if t in ("today", "tonight"):
        return today
    if t == "tomorrow":
        return today + timedelta(days=1)
    if t in _WEEKDAYS:
        return today + timedelta(days=(_WEEKDAYS.index(t) - today.weekday()) % 7 or 7)
    if not (_MONTHS.search(t) or re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", t)):
        return None
    cleaned = re.sub(r"\b(the|of)\b", " ", t)
    try:
        parsed = dateparser.parse(cleaned, default=datetime(today.year, 1, 1)).date()
    except (ValueError, OverflowError):
        return None
    if parsed < today and not re.search(r"\b\d{4}\b", t):
        parsed = parsed.replace(year=parsed.year + 1)
    return parsed


def describe_when(when: datetime, now: datetime) -> str:
    """ "at 18:30", "tomorrow at 09:00", "on Friday 3 May at 10:00" (in ``when``'s zone)."""
    days = (when.date() - now.date()).days
    at = f"at {when:%H:%M}"
    if days == 0:
        return at
    if days == 1:
        return f"tomorrow {at}"
    if days < 7:
        return f"on {when:%A} {at}"
    return f"on {when:%A} {when.day} {when:%B %Y} {at}"
