"""Monitor definitions and their alert conditions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workers.monitor.conditions import ConditionError, json_path, parse
from workers.monitor.monitors import Monitor, name_for


@pytest.mark.parametrize(
    ("condition", "values", "text", "expected"),
    [
        ("status >= 400", {"status": 500}, "", True),
        ("status >= 400", {"status": 200}, "", False),
        ("status != 200 or latency > 800", {"status": 200, "latency": 900.0}, "", True),
        ("status != 200 and latency > 800", {"status": 500, "latency": 10.0}, "", False),
        ("contains error", {}, "An ERROR happened", True),
        ("not contains Welcome", {}, "Welcome home", False),
        ('!contains "all good"', {}, "all good here", False),
        ("> 100", {"": 150}, "", True),
        ("< 1", {"": 1}, "", False),
        ("state == down", {"state": "DOWN"}, "", True),
        ('state != "up and running"', {"state": "up and running"}, "", False),
        ("price = 5", {"price": "5"}, "", True),
    ],
)
def test_conditions(condition, values, text, expected):
    assert parse(condition).holds(values.__getitem__, text) is expected


@pytest.mark.parametrize("bad", ["", "status", "status >>> 3", "is it down?"])
def test_unreadable_conditions_are_refused(bad):
    with pytest.raises(ConditionError):
        parse(bad)


def test_text_cannot_be_ordered_and_text_is_not_a_number():
    with pytest.raises(ConditionError, match="compare text"):
        parse("state > up")
    with pytest.raises(ConditionError, match="not a number"):
        parse("price > 3").holds(lambda f: "n/a")


def test_json_paths():
    data = {"bitcoin": {"usd": 70123.5}, "items": [{"price": 3}, {"price": 4}]}
    assert json_path(data, "bitcoin.usd") == 70123.5
    assert json_path(data, "items[1].price") == 4
    assert json_path(data, "items.0.price") == 3
    with pytest.raises(ConditionError, match="missing 'eur'"):
        json_path(data, "bitcoin.eur")
    with pytest.raises(ConditionError):
        json_path(data, "items[7].price")


def test_monitors_get_default_conditions_and_check_their_target():
    http = Monitor(name="site", kind="http", target="https://example.com/health", every=30)
    assert http.condition == "status >= 400"
    assert Monitor(name="q", kind="queue_depth", target="tts", every=5).condition == "> 100"
    assert Monitor(name="w", kind="workers_missing", target="tts,stt", every=5).queues == [
        "tts",
        "stt",
    ]
    assert len(Monitor(name="w2", kind="workers_missing", every=5).queues) == 5
    for bad in (
        {"kind": "http", "target": "ftp://example.com"},
        {"kind": "http", "target": "not a url"},
        {"kind": "json", "target": "https://api.example.com/p"},  # json needs a condition
        {"kind": "queue_depth", "target": "nope"},
        {"kind": "workers_missing", "target": "stt,nope"},
        {"kind": "provider_errors", "target": "gpu"},
        {"kind": "queue_depth", "condition": "latency > 3"},
        {"kind": "http", "target": "https://e.com", "condition": "what?"},
    ):
        with pytest.raises(ValidationError):
            Monitor(name="bad", every=5, **bad)
    with pytest.raises(ValidationError):
        Monitor(name="Bad Name", kind="queue_depth", every=5)


def test_default_names_are_readable():
    assert name_for("http", "https://example.com/") == "http-example-com"
    assert name_for("json", "https://api.coingecko.com/api/v3/simple/price") == (
        "json-api-coingecko-com-api-v3-simple-price"
    )
    assert name_for("queue_depth", "tts") == "queue-depth-tts"
    assert name_for("provider_errors", "") == "provider-errors"
