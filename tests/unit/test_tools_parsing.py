"""Spoken numbers, durations, times and dates, as the tools parse them."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from workers.intents.words_to_numbers import words_to_numbers
from workers.tools.builtin.spoken_time import (
    describe_duration,
    describe_when,
    parse_clock,
    parse_date,
    parse_duration,
    parse_when,
    resolve_timezone,
)

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 5, 4, 14, 0, tzinfo=PARIS)  # a Monday afternoon


@pytest.mark.parametrize(
    ("spoken", "digits"),
    [
        ("set a timer for five minutes", "set a timer for 5 minutes"),
        ("twelve", "12"),
        ("twenty five", "25"),
        ("twenty-five minutes", "25 minutes"),
        ("one hundred and five", "105"),
        ("a minute", "1 minute"),
        ("an hour", "1 hour"),
        ("a hundred and one dalmatians", "101 dalmatians"),
        ("two point five", "2.5"),
        ("two thousand and twenty six", "2026"),
        ("one hundred twenty three thousand four hundred and fifty six", "123456"),
        ("nine thirty", "9 30"),
        ("five six", "5 6"),
        ("Forty-Two!", "42!"),
        ("set a timer", "set a timer"),
        ("rock and roll", "rock and roll"),
        ("one and two", "1 and 2"),
        ("a cat", "a cat"),
    ],
)
def test_words_to_numbers(spoken, digits):
    assert words_to_numbers(spoken) == digits


@pytest.mark.parametrize(
    ("spoken", "seconds"),
    [
        ("5 minutes", 300),
        ("five minutes", 300),
        ("1 hour 30 minutes", 5400),
        ("90 seconds", 90),
        ("in 10 minutes", 600),
        ("1h30m", 5400),
        ("a minute", 60),
        ("an hour and a half", 5400),
        ("half an hour", 1800),
        ("two and a half hours", 9000),
        ("a quarter of an hour", 900),
        ("1 minute and 30 seconds", 90),
        ("2 days", 172800),
        ("twenty-five minutes", 1500),
    ],
)
def test_parse_duration(spoken, seconds):
    assert parse_duration(spoken) == seconds


@pytest.mark.parametrize("spoken", ["10", "soon", "5 parsecs", "", "0 minutes", "500 days"])
def test_parse_duration_refuses_what_it_cannot_understand(spoken):
    with pytest.raises(ValueError):
        parse_duration(spoken)


def test_describe_duration():
    assert describe_duration(5400) == "1 hour 30 minutes"
    assert describe_duration(1) == "1 second"
    assert describe_duration(2 * 86400 + 3 * 3600) == "2 days 3 hours"


@pytest.mark.parametrize(
    ("spoken", "expected"),
    [
        ("in 10 minutes", datetime(2026, 5, 4, 14, 10, tzinfo=PARIS)),
        ("10 minutes from now", datetime(2026, 5, 4, 14, 10, tzinfo=PARIS)),
        ("at 18:30", datetime(2026, 5, 4, 18, 30, tzinfo=PARIS)),
        ("at 6 pm", datetime(2026, 5, 4, 18, 0, tzinfo=PARIS)),
        ("at 6:30 p.m.", datetime(2026, 5, 4, 18, 30, tzinfo=PARIS)),
        ("at 3", datetime(2026, 5, 4, 15, 0, tzinfo=PARIS)),  # 3 o'clock already passed: 15:00
        ("at 13:00", datetime(2026, 5, 5, 13, 0, tzinfo=PARIS)),  # passed today: tomorrow
        ("at seven am", datetime(2026, 5, 5, 7, 0, tzinfo=PARIS)),
        ("tomorrow at 9", datetime(2026, 5, 5, 9, 0, tzinfo=PARIS)),
        ("tomorrow at nine thirty", datetime(2026, 5, 5, 9, 30, tzinfo=PARIS)),
        ("tomorrow", datetime(2026, 5, 5, 9, 0, tzinfo=PARIS)),
        ("tonight at 8", datetime(2026, 5, 4, 20, 0, tzinfo=PARIS)),
        ("on Friday at noon", datetime(2026, 5, 8, 12, 0, tzinfo=PARIS)),
        ("next monday at 8 am", datetime(2026, 5, 11, 8, 0, tzinfo=PARIS)),
        ("half past 3", datetime(2026, 5, 4, 15, 30, tzinfo=PARIS)),
        ("May 3 at 10", datetime(2027, 5, 3, 10, 0, tzinfo=PARIS)),
        ("2026-05-05 10:00", datetime(2026, 5, 5, 10, 0, tzinfo=PARIS)),
    ],
)
def test_parse_when(spoken, expected):
    assert parse_when(spoken, NOW) == expected


@pytest.mark.parametrize(
    "spoken", ["yesterday", "at 25:00", "in 5 parsecs", "whenever", "2026-05-01 10:00"]
)
def test_parse_when_refuses_the_past_and_nonsense(spoken):
    with pytest.raises(ValueError):
        parse_when(spoken, NOW)


def test_describe_when():
    assert describe_when(NOW + timedelta(hours=1), NOW) == "at 15:00"
    assert describe_when(NOW + timedelta(days=1), NOW) == "tomorrow at 14:00"
    assert describe_when(NOW + timedelta(days=4), NOW) == "on Friday at 14:00"


def test_parse_clock():
    assert parse_clock("15:30") == time(15, 30)
    assert parse_clock("3 pm") == time(15, 0)
    assert parse_clock("12 am") == time(0, 0)
    assert parse_clock("noon") == time(12, 0)
    assert parse_clock("at 9 o'clock") == time(9, 0)
    assert parse_clock("teatime") is None
    assert parse_clock("13 pm") is None


@pytest.mark.parametrize(
    ("spoken", "expected"),
    [
        ("christmas", date(2026, 12, 25)),
        ("Friday", date(2026, 5, 8)),
        ("December 25", date(2026, 12, 25)),
        ("25th of december", date(2026, 12, 25)),
        ("the 3rd of May", date(2027, 5, 3)),
        ("2026-12-25", date(2026, 12, 25)),
        ("tomorrow", date(2026, 5, 5)),
        ("new year's eve", date(2026, 12, 31)),
    ],
)
def test_parse_date(spoken, expected):
    assert parse_date(spoken, NOW.date()) == expected


def test_parse_date_gives_none_for_nonsense():
    assert parse_date("someday", NOW.date()) is None
    assert parse_date("9", NOW.date()) is None


def test_resolve_timezone():
    assert resolve_timezone("Tokyo").key == "Asia/Tokyo"
    assert resolve_timezone("europe/paris").key == "Europe/Paris"
    assert resolve_timezone("Los Angeles").key == "America/Los_Angeles"
    with pytest.raises(ValueError, match="unknown timezone"):
        resolve_timezone("Atlantis")
