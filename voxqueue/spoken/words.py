"""Written forms a voice would misread, rewritten as the words a person says.

Every engine gets: ids and codes dropped ("(id ad90ec79)"), zone names and UTC offsets said
("Tokyo", "UTC plus nine"), ISO dates as dates, units, temperatures, percents, symbols and
abbreviations in words ("km/h" → "kilometers per hour", "e.g." → "for example").

An engine that reads numbers itself well (ElevenLabs) keeps its digits; one that does not
(Piper, through espeak: "€12.99" is read "euros twelve point nine nine", "14:30" "fourteen
thirty zero") gets times, money, years, ordinals and the remaining numbers as words too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


class Reading(StrEnum):
    """How much an engine needs written out."""

    WORDS = "words"  # numbers, times and money as words too (Piper)
    DIGITS = "digits"  # the engine reads numbers, times and money itself (ElevenLabs)


Rule = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]

# -- ids and codes: never said --------------------------------------------------------------
_HEX = r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_IDS: list[Rule] = [
    (re.compile(rf"\s*\((?:id|ID|ref|code)\b[:#\s]*(?:{_UUID}|{_HEX}|[\w-]{{4,}})\)"), ""),
    (re.compile(rf"[,;]?\s*\b(?:id|ID)\b[:#\s]+(?:{_UUID}|{_HEX})\b"), ""),
    (re.compile(rf"\s*\b(?:{_UUID}|{_HEX})\b"), ""),
]

# -- zones, offsets, dates -------------------------------------------------------------------
_ZONE = re.compile(r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|"
                   r"Pacific|Etc)/(?:[A-Za-z_]+/)?([A-Za-z_]+)\b")
_OFFSET = re.compile(r"\b(UTC|GMT)\s?([+-−])\s?(\d{1,2}):?(\d{2})?\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _offset(m: re.Match[str]) -> str:
    hours, minutes = int(m.group(3)), int(m.group(4) or 0)
    sign = "plus" if m.group(2) == "+" else "minus"
    if not hours and not minutes:
        return m.group(1)
    return f"{m.group(1)} {sign} {hours}" + (f" {minutes}" if minutes else "")


def _iso_date(m: re.Match[str]) -> str:
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group(0)
    return f"{_MONTHS[month - 1]} {day}, {year}"


# -- units, temperatures, percents -----------------------------------------------------------
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "kW": ("kilowatt", "kilowatts"),
    "W": ("watt", "watts"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "l": ("liter", "liters"),
    "L": ("liter", "liters"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "KB": ("kilobyte", "kilobytes"),
    "Hz": ("hertz", "hertz"),
    "hPa": ("hectopascal", "hectopascals"),
}
_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"
_UNIT_NAMES = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_UNIT = re.compile(rf"{_NUMBER}\s?({_UNIT_NAMES})(?![\w/])")
_DEGREES = re.compile(rf"{_NUMBER}\s?°\s?([CF])?\b")
_PERCENT = re.compile(rf"{_NUMBER}\s?%")


def _unit(m: re.Match[str]) -> str:
    one, many = _UNITS[m.group(2)]
    return f"{m.group(1)} {one if m.group(1) in ('1', '-1') else many}"


def _degrees(m: re.Match[str]) -> str:
    scale = {"C": " Celsius", "F": " Fahrenheit"}.get(m.group(2) or "", "")
    return f"{m.group(1)} degree{'' if m.group(1) == '1' else 's'}{scale}"


# -- abbreviations and symbols ---------------------------------------------------------------
_ABBREVIATIONS: list[Rule] = [
    (re.compile(r"\be\.g\.(?=\s|,|$)", re.IGNORECASE), "for example"),
    (re.compile(r"\bi\.e\.(?=\s|,|$)", re.IGNORECASE), "that is"),
    (re.compile(r"\betc\.(?=\s|$)", re.IGNORECASE), "and so on."),
    (re.compile(r"\betc\b", re.IGNORECASE), "and so on"),
    (re.compile(r"\bvs\.?(?=\s)", re.IGNORECASE), "versus"),
    (re.compile(r"\bapprox\.?(?=\s)", re.IGNORECASE), "about"),
    (re.compile(r"\bDr\.(?=\s+[A-Z])"), "Doctor"),
    (re.compile(r"\bMr\.(?=\s)"), "Mister"),
    (re.compile(r"\bMrs\.(?=\s)"), "Missus"),
    (re.compile(r"(?<=[a-z] )St\.(?=\s|$)"), "Street"),
    (re.compile(r"\bSt\.(?=\s+[A-Z])"), "Saint"),
    (re.compile(r"\b[Nn]o\.\s?(?=\d)"), "number "),
    (re.compile(r"#(?=\d)"), "number "),
    (re.compile(r"\bw/(?=\s)"), "with"),
    (re.compile(r"\s&\s"), " and "),
    (re.compile(r"(?<=\d)\s?[x×]\s?(?=\d)"), " times "),
    (re.compile(r"\s?÷\s?"), " divided by "),
    (re.compile(r"(?<=\d)\s?\+\s?(?=\d)"), " plus "),
    (re.compile(r"(?<=\d)\s?=\s?(?=-?\d)"), " equals "),
    (re.compile(r"(?<=[\s(])~\s?(?=\d)"), "about "),
    (re.compile(r"\s?(?:→|->|⇒)\s?"), " to "),
    (re.compile(r"(?<=[A-Za-z])/(?=[A-Za-z])"), " or "),
]


def _apply(text: str, rules: list[Rule]) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def words(text: str, reading: Reading = Reading.WORDS) -> str:
    """``text`` (plain, no markdown) with everything a voice would misread written out."""
    text = _apply(text, _IDS)
    text = _ZONE.sub(lambda m: m.group(1).replace("_", " "), text)
    text = _OFFSET.sub(_offset, text)
    text = _ISO_DATE.sub(_iso_date, text)
    text = _DEGREES.sub(_degrees, text)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _UNIT.sub(_unit, text)
    text = _apply(text, _ABBREVIATIONS)
    if reading is Reading.WORDS:
        from voxqueue.spoken.numbers_to_words import numbers_as_words

        text = numbers_as_words(text)
    text = re.sub(r"\s+([.,!?;:])", r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()
