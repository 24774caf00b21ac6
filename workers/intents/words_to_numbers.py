"""Spoken numbers to digits: "twenty five minutes" -> "25 minutes".

Shared by the tools that parse durations and times and by the offline intent matcher, since
speech recognisers often write numbers as words.
"""

from __future__ import annotations

import copy
import re

_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_DIGIT_WORDS = {**_UNITS, "oh": 0}
# "a"/"an" counts as 1 only before these ("a minute", "an hour", "a hundred").
_ONE_BEFORE = {
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "dozen",
    "hundred",
    "thousand",
    "million",
    "billion",
}
_TOKEN = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*|\d+(?:\.\d+)?|\s+|.", re.DOTALL)


def _is_number_word(word: str) -> bool:
    return word in _UNITS or word in _TENS or word in _SCALES


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


class _Number:
    """Accumulates one spoken number ("one hundred and five")."""

    def __init__(self) -> None:
        self.total = 0
        self.current = 0
        self.last: str | None = None  # "unit", "teen", "tens" or "scale"
        self.words = 0

    def accepts(self, word: str) -> bool:
        if word in _SCALES:
            return (self.words > 0 and self.last != "scale") or self.current > 0
        if word in _TENS:
            return self.last in (None, "scale") and self.current % 100 == 0
        if word in _UNITS:
            value = _UNITS[word]
            if self.last in (None, "scale"):
                return True
            return self.last == "tens" and 0 < value < 10
        return False

    def add(self, word: str) -> None:
        self.words += 1
        if word in _SCALES:
            scale = _SCALES[word]
            if scale == 100:
                self.current = max(self.current, 1) * 100
            else:
                self.total += max(self.current, 1) * scale
                self.current = 0
            self.last = "scale"
        elif word in _TENS:
            self.current += _TENS[word]
            self.last = "tens"
        else:
            self.current += _UNITS[word]
            self.last = "unit" if _UNITS[word] < 10 else "teen"

    @property
    def value(self) -> int:
        return self.total + self.current


def words_to_numbers(text: str) -> str:
    """Replace spoken numbers with digits, keeping every other character as it was.

    "twelve" -> "12", "twenty five" / "twenty-five" -> "25", "one hundred and five" -> "105",
    "two point five" -> "2.5", "a minute" -> "1 minute", "an hour" -> "1 hour"; the "a" of
    "set a timer" is left alone.
    """
    tokens = _TOKEN.findall(text)
    words = [t.lower() for t in tokens]
    out: list[str] = []
    i = 0
    while i < len(tokens):
        consumed = _read_number(words, i)
        if consumed is None:
            out.append(tokens[i])
            i += 1
            continue
        value, end = consumed
        out.append(value)
        i = end
    return "".join(out)


def _next_word(words: list[str], i: int) -> int | None:
    """Index of the next non-space token after ``i`` (None at the end)."""
    j = i + 1
    while j < len(words) and words[j].isspace():
        j += 1
    return j if j < len(words) else None


def _read_number(words: list[str], start: int) -> tuple[str, int] | None:
    """The number starting at ``start`` as digits and the index after it, or None."""
    first = words[start]
    if first in ("a", "an"):
        nxt = _next_word(words, start)
        if nxt is None or _singular(words[nxt]) not in _ONE_BEFORE:
            return None
        if words[nxt] in _SCALES:  # "a hundred and five": read on as a number
            number = _Number()
            number.add("one")
            return _continue(words, number, nxt)
        return "1", start + 1
    parts = first.split("-")
    if not all(_is_number_word(p) for p in parts):
        return None
    number = _Number()
    if not _extend(number, parts):
        return None
    return _continue(words, number, start + 1)


def _continue(words: list[str], number: _Number, i: int) -> tuple[str, int]:
    """Extend ``number`` with the words from ``i`` on; handles "and" and "point"."""
    end = i
    while True:
        nxt = _next_word(words, end - 1) if end > 0 else None
        if nxt is None:
            break
        word = words[nxt]
        if word == "and" and number.last == "scale":
            after = _next_word(words, nxt)
            if after is not None and all(
                p in _UNITS or p in _TENS for p in words[after].split("-")
            ):
                end = nxt + 1
                continue
            break
        if word == "point":
            digits, after_end = _read_decimals(words, nxt)
            if digits:
                return f"{number.value}.{digits}", after_end
            break
        parts = word.split("-")
        if all(_is_number_word(p) for p in parts):
            trial = copy.copy(number)
            if _extend(trial, parts):
                number = trial
                end = nxt + 1
                continue
        break
    return str(number.value), end


def _extend(number: _Number, parts: list[str]) -> bool:
    """Add every part to ``number``; False (leaving it half-changed) when one does not fit."""
    for part in parts:
        if not number.accepts(part):
            return False
        number.add(part)
    return True


def _read_decimals(words: list[str], point: int) -> tuple[str, int]:
    """Digits spoken one by one after "point" ("two point five six" -> "56")."""
    digits = ""
    end = point + 1
    j = _next_word(words, point)
    while j is not None and words[j] in _DIGIT_WORDS and _DIGIT_WORDS[words[j]] < 10:
        digits += str(_DIGIT_WORDS[words[j]])
        end = j + 1
        j = _next_word(words, j)
    return digits, end
