"""Times, money, years, ordinals and numbers as words, for an engine that misreads digits."""

from __future__ import annotations

import re

from num2words import num2words

_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"),
               "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"),
               "¥": ("yen", "yen", "", "")}
_CODES = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
_SCALES = r"(?:\s?(thousand|million|billion|trillion|[kKmMbB]n?)\b)?"

_MONEY = re.compile(r"([$€£¥])\s?(\d[\d,]*)(?:\.(\d{1,2}))?" + _SCALES)
_MONEY_CODE = re.compile(r"\b(\d[\d,]*)(?:\.(\d{1,2}))?\s?(USD|EUR|GBP|JPY)\b")
_CODE_MONEY = re.compile(r"\b(USD|EUR|GBP|JPY)\s?(\d[\d,]*(?:\.\d{1,2})?)")
_HALF = r"(?:\s?([AaPp])\.?\s?[Mm]\b(?:\.(?!\s+[A-Z]|\s*$))?)"
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})(?::\d{2})?" + _HALF + "?")
_HOUR_AMPM = re.compile(r"\b(\d{1,2})" + _HALF)
_DAY_OF_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|"
                           r"October|November|December) (\d{1,2})\b(?![:.]\d)")
_YEAR = re.compile(r"(?:(?<=\bin )|(?<=, )|(?<=\bof )|(?<=\bsince )|(?<=\buntil )|(?<=\byear ))"
                   r"(1[1-9]\d\d|20\d\d)\b(?![.,]\d|\s?%)")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")
_DECIMAL = re.compile(r"(?<![\d.])(-?)(\d[\d,]*)\.(\d+)\b")
_INTEGER = re.compile(r"(?<![\d.])(-?)(\d[\d,]*)\b")
_SCALE_WORDS = {"k": "thousand", "m": "million", "mn": "million", "b": "billion",
                "bn": "billion"}


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))


def _say(n: int) -> str:
    return str(num2words(n)).replace(",", "").replace("-", " ")


def _money(symbol: str, whole: str, cents: str | None, scale: str | None) -> str:
    one, many, cent, cents_word = _CURRENCIES[symbol]
    if scale:
        scale_word = _SCALE_WORDS.get(scale.lower(), scale.lower())
        amount = whole + (f".{cents}" if cents else "")
        return f"{amount} {scale_word} {many}"
    n = _int(whole)
    said = f"{_say(n)} {one if n == 1 else many}"
    if cents and int(cents.ljust(2, "0")) and cent:
        c = int(cents.ljust(2, "0"))
        said += f" and {_say(c)} {cent if c == 1 else cents_word}"
    return said


def _whole_and_cents(amount: str) -> tuple[str, str | None]:
    whole, _, cents = amount.partition(".")
    return whole, cents or None


def _clock(m: re.Match[str]) -> str:
    hour, minute, half = int(m.group(1)), int(m.group(2)), m.group(3)
    if hour > 24 or minute > 59:
        return m.group(0)
    if minute == 0:
        said = f"{_say(hour)} o'clock" if not half else _say(hour)
    elif minute < 10:
        said = f"{_say(hour)} oh {_say(minute)}"
    else:
        said = f"{_say(hour)} {_say(minute)}"
    return said + (f" {half.upper()} M" if half else "")


def _year(m: re.Match[str]) -> str:
    return str(num2words(int(m.group(1)), to="year")).replace("-", " ")


def _decimal(m: re.Match[str]) -> str:
    sign = "minus " if m.group(1) else ""
    return f"{sign}{_say(_int(m.group(2)))} point {' '.join(_say(int(d)) for d in m.group(3))}"


def numbers_as_words(text: str) -> str:
    """Every time, amount of money, year, ordinal and number in ``text`` as words."""
    text = _MONEY.sub(lambda m: _money(m.group(1), m.group(2), m.group(3), m.group(4)), text)
    text = _MONEY_CODE.sub(lambda m: _money(_CODES[m.group(3)], m.group(1), m.group(2), None),
                           text)
    text = _CODE_MONEY.sub(lambda m: _money(_CODES[m.group(1)], *_whole_and_cents(m.group(2)),
                                            None), text)
    text = _CLOCK.sub(_clock, text)
    text = _HOUR_AMPM.sub(lambda m: f"{_say(int(m.group(1)))} {m.group(2).upper()} M", text)
    text = _DAY_OF_MONTH.sub(lambda m: f"{m.group(1)} {m.group(2)}th", text)
    text = _YEAR.sub(_year, text)
    text = _ORDINAL.sub(lambda m: str(num2words(_int(m.group(1)), to="ordinal")).replace("-", " "),
                        text)
    text = _DECIMAL.sub(_decimal, text)
    return _INTEGER.sub(lambda m: ("minus " if m.group(1) else "") + _say(_int(m.group(2))), text)
