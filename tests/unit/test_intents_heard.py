"""The local intents read what a real recognizer writes (digits, hyphens, punctuation, a dropped
article) and never guess: a sentence no tool fits gets no call, not a catch-all's."""

from __future__ import annotations

import pytest

from voxqueue.settings import Settings
from workers.intents import IntentMatcher, matcher_for
from workers.intents.matcher import prepared, restored
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.registry import Tool
from workers.tools.builtin.math_tools import calculate
from workers.tools.builtin.web import fetch_url


@pytest.fixture(scope="module")
def matcher() -> IntentMatcher:
    return matcher_for(assemble_tools(Settings(), mcp=False))


def calls(matcher: IntentMatcher, text: str) -> list[tuple[str, dict]]:
    return [(c.tool, c.arguments) for c in matcher.match(text)]


@pytest.mark.parametrize(("heard", "expected"), [
    ("What is 100 divided by 4?", [("calculate", {"expression": "100 divided by 4"})]),
    ("Set a timer for 30 seconds.", [("set_timer", {"duration": "30 seconds"})]),
    ("What time is it in New York?", [("get_current_time", {"timezone": "New York"})]),
    ("What is weather in Madrid?", [("get_weather", {"location": "Madrid"})]),
    ("Convert 10 miles to kilometers.",
     [("convert_units", {"value": 10.0, "from_unit": "miles", "to_unit": "kilometers"})]),
    ("Roll a 20-sided die.", [("roll_dice", {"sides": 20})]),
    ("roll a twenty sided die", [("roll_dice", {"sides": 20})]),
    ("Pick a number between 1 and 10.", [("random_number", {"low": 1, "high": 10})]),
    ("Remember that my car is parked on level 3.",
     [("remember", {"fact": "my car is parked on level 3"})]),
])
def test_what_a_recognizer_writes_reaches_the_right_tool(matcher, heard, expected):
    assert calls(matcher, heard) == expected


@pytest.mark.parametrize("sentence", [
    "What is weather in mid grade?",  # a misheard city is the weather tool's problem...
    "what is the capital of France",  # ...but nothing here is arithmetic
    "How much is 13% of baby?",
    "what is love",
])
def test_no_sentence_falls_into_the_calculator(matcher, sentence):
    assert all(call.tool != "calculate" for call in matcher.candidates(sentence))


def test_the_calculator_and_the_fetcher_refuse_what_is_not_theirs():
    maths = Tool.from_function(calculate)
    assert maths.args_model.model_validate({"expression": "(2 + 3) ** 2"})
    with pytest.raises(ValueError, match="not arithmetic"):
        maths.args_model.model_validate({"expression": "weather in madrid"})
    fetch = Tool.from_function(fetch_url)
    assert fetch.args_model.model_validate({"url": "example.com/page"})
    for not_an_address in ("the garage door", "my notes", ""):
        with pytest.raises(ValueError):
            fetch.args_model.model_validate({"url": not_an_address})


def test_numbers_become_stand_ins_and_come_back():
    text, numbers = prepared("Roll a twenty-sided die and add -3.5 to 1,000")
    assert numbers == ["20", "-3.5", "1000"]
    assert text == "Roll a vqnumber0 sided die and add vqnumber1 to vqnumber2"
    assert restored(text, numbers) == "Roll a 20 sided die and add -3.5 to 1000"
