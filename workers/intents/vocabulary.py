"""Likely spoken values of a tool argument, from its type and its name.

The offline recognizer needs whole sentences to learn the command language from, and the
offline reply needs an example of each thing it can do: a template's ``{slot}`` is filled
with these values. Typed arguments give their own values (numbers, ``Literal`` and ``Enum``
choices); a few common argument names get a list (places, arithmetic, durations, times);
any other text argument is free text and has no list.
"""

from __future__ import annotations

import enum
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

_ONES = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_TENS = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

#: Numbers as people say them, in order: one to twenty, then the tens, then a few more.
NUMBER_WORDS: tuple[str, ...] = (
    *_ONES,
    "twenty five",
    *_TENS,
    "a hundred",
    "one hundred",
    "two hundred",
    "five hundred",
    "a thousand",
)

#: Places people ask about; the first is used in examples.
PLACES: tuple[str, ...] = (
    "paris",
    "london",
    "berlin",
    "tokyo",
    "new york",
    "lisbon",
    "madrid",
    "rome",
    "boston",
    "chicago",
    "sydney",
    "moscow",
    "beijing",
    "toronto",
    "amsterdam",
    "dublin",
    "vienna",
    "prague",
    "oslo",
    "stockholm",
    "copenhagen",
    "helsinki",
    "warsaw",
    "athens",
    "istanbul",
    "cairo",
    "dubai",
    "delhi",
    "mumbai",
    "singapore",
    "hong kong",
    "seoul",
    "shanghai",
    "bangkok",
    "los angeles",
    "san francisco",
    "seattle",
    "miami",
    "denver",
    "mexico city",
    "montreal",
    "vancouver",
    "brussels",
    "zurich",
    "geneva",
    "munich",
    "hamburg",
    "milan",
    "barcelona",
    "porto",
    "edinburgh",
    "manchester",
    "nairobi",
    "cape town",
    "lagos",
    "buenos aires",
    "rio de janeiro",
    "sao paulo",
    "lima",
    "auckland",
    "melbourne",
    "utc",
)

_OPERATORS = ("plus", "minus", "times", "divided by", "multiplied by")
_UNITS = ("seconds", "minutes", "hours")
_SMALL = [*_ONES[:12], "fifteen", "twenty", "thirty", "forty five", "ninety"]


def _arithmetic() -> tuple[str, ...]:
    operands = (*_ONES, *_TENS[:3], "a hundred")
    phrases = ["two plus two"]
    phrases += [f"{a} {op} {b}" for a in operands for op in _OPERATORS for b in operands]
    phrases += [
        f"{a} percent of {b}"
        for a in ("ten", "twenty", "fifteen", "fifty")
        for b in ("forty", "sixty", "eighty", "a hundred", "two hundred")
    ]
    phrases += [f"the square root of {a}" for a in ("four", "nine", "sixteen", "twenty five")]
    return tuple(phrases)


def _durations() -> tuple[str, ...]:
    phrases = [
        "five minutes",
        "a minute",
        "an hour",
        "half an hour",
        "a second",
        "one and a half hours",
        "one minute",
        "one second",
        "one hour",
    ]
    phrases += [f"{n} {unit}" for n in _SMALL[1:] for unit in _UNITS]
    return tuple(phrases)


def _times() -> tuple[str, ...]:
    hours = _ONES[:12]
    phrases = ["tomorrow at nine"]
    phrases += [f"in {d}" for d in _durations()[::3]]
    phrases += [f"at {h} {part}" for h in hours for part in ("", "am", "pm", "o'clock")]
    phrases += [
        f"{day} {part}".strip()
        for day in ("today", "tomorrow", "tonight")
        for part in ("", "morning", "afternoon", "evening")
    ]
    phrases += [
        f"on {d}"
        for d in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    ]
    phrases += [f"tomorrow at {h}" for h in hours]
    return tuple(" ".join(p.split()) for p in phrases)


#: Argument names (regular expressions) and the values said for them.
BY_NAME: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"location|city|place|town|country|timezone|zone|where|destination"), PLACES),
    (re.compile(r"expression|math|formula|calculation|sum"), _arithmetic()),
    (re.compile(r"duration|length|delay|timer|interval"), _durations()),
    (re.compile(r"^(when|time|at|date|due|deadline)$|_at$|_time$"), _times()),
)


def _unwrap(annotation: Any) -> Any:
    """The type inside ``Optional[...]`` and ``Annotated[...]``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            inner = [a for a in get_args(annotation) if a is not type(None)]
            if len(inner) != 1:
                return annotation
            annotation = inner[0]
        else:
            return annotation


def choices(annotation: Any) -> tuple[str, ...] | None:
    """The fixed values of a ``Literal`` or ``Enum`` argument, else None."""
    kind = _unwrap(annotation)
    if get_origin(kind) is Literal:
        return tuple(str(v) for v in get_args(kind))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return tuple(str(member.value) for member in kind)
    return None


def is_number(annotation: Any) -> bool:
    kind = _unwrap(annotation)
    return isinstance(kind, type) and issubclass(kind, (int, float)) and kind is not bool


def spoken_values(slot: str, annotation: Any) -> tuple[str, ...] | None:
    """Values a speaker is likely to say for an argument, or None for free text."""
    fixed = choices(annotation)
    if fixed is not None:
        return tuple(v.replace("_", " ").lower() for v in fixed)
    if is_number(annotation):
        return NUMBER_WORDS
    name = slot.lower()
    for pattern, values in BY_NAME:
        if pattern.search(name):
            return values
    return None
