"""Local intents: matching sentences to tool calls, the offline agent and "prefer local"."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import SecretStr

from voxqueue.settings import ProviderSettings, Settings
from workers.agent import messages as msg
from workers.agent.providers.base import Answer, ToolCallRequest
from workers.agent.providers.local_intents import LocalIntents
from workers.agent.providers.prefer_local import PreferLocal
from workers.intents import IntentMatcher, matcher_for
from workers.intents.corpus import command_lines
from workers.intents.responses import apology, error_gist, offline_reply, render_result
from workers.tool_registry.registry import ToolRegistry, ToolReply, tool


# -- a registry of test tools (plain functions, as tool authors write them) ----------------
@tool(
    examples=("what is the weather in {location}", "weather in {location}"),
    response="Weather for {location}: {result}",
)
def get_weather(location: str) -> str:
    """Current weather.

    Args:
        location: A place.
    """
    if location.lower() == "atlantis":
        raise ValueError(f"I could not find a place called {location!r}")
    return "sunny"


@tool(examples=("what time is it", "what time is it in {timezone}"))
def get_current_time(timezone: str = "UTC") -> str:
    """Current time.

    Args:
        timezone: A zone.
    """
    return f"noon in {timezone}"


@tool(examples=("what is {expression}", "calculate {expression}"))
def calculate(expression: str) -> str:
    """Arithmetic.

    Args:
        expression: The sum.
    """
    if not any(ch.isdigit() for ch in expression):
        raise ValueError(f"cannot evaluate {expression!r}")
    return f"{expression} = 42"


@tool(examples=("remember [that] {fact}",))
def remember(fact: str) -> str:
    """Remember a fact.

    Args:
        fact: The fact.
    """
    return f"I'll remember that {fact}."


@tool(examples=("set a timer for {duration}",))
def set_timer(duration: str) -> ToolReply:
    """Start a timer.

    Args:
        duration: How long.
    """
    return ToolReply(data={"id": "ad90ec79", "duration": duration},
                     say=f"Timer set for {duration}.")


@tool(examples=("roll {count} dice", "roll a die"))
def roll_dice(count: int = 1) -> str:
    """Roll dice.

    Args:
        count: How many.
    """
    return f"rolled {count}"


@tool(examples=("use {unit} units",))
def set_units(unit: Literal["celsius", "fahrenheit"]) -> str:
    """Choose units.

    Args:
        unit: Which.
    """
    return unit


@tool(examples=("broken {nonexistent} template", "also (broken"))
def broken(value: str = "") -> str:
    """A tool whose examples are wrong.

    Args:
        value: Anything.
    """
    return value


def plain_tool(x: int) -> int:
    """A tool without examples.

    Args:
        x: A number.
    """
    return x


TOOLS = (
    get_weather,
    get_current_time,
    calculate,
    remember,
    set_timer,
    roll_dice,
    set_units,
    broken,
    plain_tool,
)


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for fn in TOOLS:
        reg.add(fn)
    return reg


@pytest.fixture(scope="module")
def matcher(registry: ToolRegistry) -> IntentMatcher:
    return matcher_for(registry)


def calls_of(matcher: IntentMatcher, text: str, **kw: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.tool, c.arguments) for c in matcher.match(text, **kw)]


# -- the matcher -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What time is it?", [("get_current_time", {})]),
        ("What is the weather in Paris?", [("get_weather", {"location": "Paris"})]),
        ("what is the weather in new york", [("get_weather", {"location": "new york"})]),
        ("What is twelve times thirteen?", [("calculate", {"expression": "12 times 13"})]),
        ("Set a timer for five minutes.", [("set_timer", {"duration": "5 minutes"})]),
        (
            "Remember that my car is parked on level three.",
            [("remember", {"fact": "my car is parked on level 3"})],
        ),
        ("remember that I like tea and coffee", [("remember", {"fact": "I like tea and coffee"})]),
        ("roll three dice", [("roll_dice", {"count": 3})]),
        ("roll a die", [("roll_dice", {})]),
        ("use Fahrenheit units", [("set_units", {"unit": "fahrenheit"})]),
        ("please, what time is it", [("get_current_time", {})]),
    ],
)
def test_sentences_become_tool_calls(matcher, text, expected):
    assert calls_of(matcher, text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "tell me a story about dragons",
        "roll many dice",  # count must be a number
        "use kelvin units",  # not one of the Literal's values
        "",
        "   ",
    ],
)
def test_what_does_not_fit_is_not_matched(matcher, text):
    assert matcher.match(text) == []


def test_a_sentence_asking_two_things_becomes_two_calls(matcher):
    text = "What time is it in London, and what is the weather in Berlin?"
    assert calls_of(matcher, text) == [
        ("get_current_time", {"timezone": "London"}),
        ("get_weather", {"location": "Berlin"}),
    ]
    # Recognizers write no punctuation.
    assert calls_of(matcher, "what time is it in london and what is the weather in berlin") == [
        ("get_current_time", {"timezone": "london"}),
        ("get_weather", {"location": "berlin"}),
    ]


def test_clauses_are_split_only_when_every_clause_matches(matcher):
    assert calls_of(matcher, "remember that I bought apples, pears and plums") == [
        ("remember", {"fact": "I bought apples, pears and plums"})
    ]


def test_allowed_tools_limit_the_matches(matcher):
    assert matcher.match("what time is it", allowed={"get_weather"}) == []
    assert calls_of(matcher, "what is the weather in Paris", allowed={"calculate"}) == [
        ("calculate", {"expression": "the weather in Paris"})
    ]


def test_lenient_matching_skips_leading_noise_but_never_a_negation(matcher):
    assert matcher.match("hey jarvis what time is it") == []
    found = matcher.match("they'd jarvis what time is it in tokyo", lenient=True)
    assert [(c.tool, c.arguments, c.skipped) for c in found] == [
        ("get_current_time", {"timezone": "tokyo"}, 2)
    ]
    assert matcher.match("don't set a timer for five minutes", lenient=True) == []


def test_every_interpretation_is_listed_best_first(matcher):
    found = matcher.candidates("what is the weather in Atlantis")
    assert [(c.tool, c.arguments) for c in found] == [
        ("get_weather", {"location": "Atlantis"}),
        ("calculate", {"expression": "the weather in Atlantis"}),
    ]


def test_bad_templates_are_left_out_and_tools_without_examples_ignored(matcher):
    assert "broken" not in matcher.tools
    assert "plain_tool" not in matcher.tools
    assert matcher.templates["get_weather"] == list(get_weather.__voxqueue_tool__.examples)


def test_the_matcher_is_built_once_per_registry(registry, matcher):
    assert matcher_for(registry) is matcher
    other = ToolRegistry([registry.get("get_weather")])
    assert matcher_for(other) is not matcher
    assert list(matcher_for(other).tools) == ["get_weather"]


def test_matching_takes_milliseconds(matcher):
    started = time.perf_counter()
    for _ in range(20):
        matcher.match("What time is it in London, and what is the weather in Berlin?")
    per_call_ms = (time.perf_counter() - started) * 1000 / 20
    print(f"two-clause match: {per_call_ms:.2f} ms")
    assert per_call_ms < 500  # generous: the point is "no LLM round trip"


# -- responses -------------------------------------------------------------------------------
def test_results_are_spoken_through_the_response_template(registry):
    weather = registry.get("get_weather")
    assert render_result(weather, {"location": "Paris"}, "sunny") == "Weather for Paris: sunny"
    assert (
        render_result(registry.get("remember"), {"fact": "x"}, " I'll remember. ")
        == "I'll remember."
    )
    assert render_result(None, {}, "plain") == "plain"


def test_a_bad_response_template_falls_back_to_the_result(registry):
    t = registry.get("get_weather")
    bad = type(t)(
        name=t.name,
        description=t.description,
        fn=t.fn,
        args_model=t.args_model,
        response="{result!z} {",
    )
    assert render_result(bad, {}, "sunny") == "sunny"


def test_errors_are_reduced_to_their_gist():
    text = "Error: get_weather failed: ValueError: I could not find a place called 'Atlantis'"
    assert error_gist(text) == "I could not find a place called 'Atlantis'"
    assert apology(text) == ("Sorry, that didn't work: I could not find a place called 'Atlantis'.")
    assert (
        error_gist("Error: x did not finish within 10 s and was abandoned.")
        == "x did not finish within 10 s and was abandoned."
    )
    assert apology("") == "Sorry, that didn't work."
    assert len(error_gist("Error: " + "word " * 200)) < 210


def test_the_offline_reply_names_things_it_can_do(matcher):
    reply = offline_reply(matcher)
    assert reply.startswith("Sorry, I can't answer that offline.")
    assert "You can ask me things like:" in reply
    # Examples are real requests: each one matches.
    examples = reply.split("like:", 1)[1].rstrip(".").replace(", or ", ", ").split(", ")
    assert len(examples) == 3
    for example in examples:
        assert matcher.match(example), example
    assert offline_reply(matcher, allowed=set()) == "Sorry, I can't answer that offline."


# -- the corpus for the offline recognizer ------------------------------------------------
def test_the_command_corpus_spells_out_the_examples(matcher):
    lines = command_lines(matcher)
    assert "<s> what is the weather in paris </s>" in lines
    assert "<s> what time is it </s>" in lines
    assert "<s> remember that" in lines  # a free-text slot cuts the sentence
    assert "twelve times thirteen" in lines  # slot values are learned too
    assert any(" and " in line and line.count("<s>") == 1 for line in lines)  # two requests
    assert all(line == line.lower() and "{" not in line for line in lines)
    assert command_lines(matcher) == lines  # deterministic


# -- the offline agent -----------------------------------------------------------------------
def history(*texts: str) -> list[dict[str, Any]]:
    return [msg.system("be brief"), *(msg.user(t) for t in texts)]


def run_tools(registry: ToolRegistry, answer: Answer) -> list[dict[str, Any]]:
    """What the agent loop appends after a tool-call answer (with the real tools run)."""
    from workers.tool_registry.context import ToolCall
    from workers.tools.executor import run_tool_call

    out = [msg.assistant_tool_calls([c.as_dict() for c in answer.tool_calls])]
    for c in answer.tool_calls:
        outcome = run_tool_call(
            registry,
            ToolCall(turn_id="t", session_id="s", device=None, call_id=c.id, name=c.name),
            c.arguments,
            timeout_s=5,
            max_chars=1000,
        )
        out.append(msg.from_outcome(outcome))
    return out


def complete(model: Any, messages: list[dict[str, Any]], registry: ToolRegistry) -> Answer:
    return model.complete(messages, registry.schemas(), deadline=time.time() + 10)


@pytest.fixture
def local(registry: ToolRegistry) -> LocalIntents:
    return LocalIntents(Settings(), registry)


def test_local_agent_calls_the_tool_then_speaks_its_result(local, registry):
    messages = history("What is the weather in Paris?")
    first = complete(local, messages, registry)
    assert first.text == ""
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert first.tool_calls[0].id.startswith("local_")
    messages += run_tools(registry, first)
    second = complete(local, messages, registry)
    assert second.tool_calls == []
    assert second.text == "Weather for Paris: sunny"


def test_a_tool_reply_gives_the_model_its_data_and_the_ear_its_sentence(local, registry):
    messages = history("Set a timer for 10 minutes")
    first = complete(local, messages, registry)
    asked, result = run_tools(registry, first)
    # The model reads the data (with the id to cancel it by); the history keeps the sentence.
    assert json.loads(result["content"]) == {"id": "ad90ec79", "duration": "10 minutes"}
    assert result["say"] == "Timer set for 10 minutes."
    messages += [asked, result]
    assert complete(local, messages, registry).text == "Timer set for 10 minutes."
    # ... and a model is never sent the sentence: it is not part of the OpenAI message format.
    wire = msg.for_model(messages)
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in wire)
    assert wire[-1] == {k: v for k, v in result.items() if k != "say"}
    assert messages[-1]["say"]  # the history itself is left whole


def test_local_agent_answers_two_requests_at_once(local, registry):
    messages = history("What time is it in London, and what is the weather in Berlin?")
    first = complete(local, messages, registry)
    assert [c.name for c in first.tool_calls] == ["get_current_time", "get_weather"]
    assert len({c.id for c in first.tool_calls}) == 2
    messages += run_tools(registry, first)
    assert complete(local, messages, registry).text == "noon in London Weather for Berlin: sunny"


def test_a_failed_call_is_apologised_for_after_the_other_interpretations(local, registry):
    messages = history("What is the weather in Atlantis?")
    first = complete(local, messages, registry)
    assert [c.name for c in first.tool_calls] == ["get_weather"]
    messages += run_tools(registry, first)
    second = complete(local, messages, registry)  # next interpretation: arithmetic
    assert [(c.name, json.loads(c.arguments)) for c in second.tool_calls] == [
        ("calculate", {"expression": "the weather in Atlantis"})
    ]
    messages += run_tools(registry, second)
    third = complete(local, messages, registry)
    assert third.tool_calls == []
    assert third.text == "Sorry, that didn't work: I could not find a place called 'Atlantis'."


def test_a_question_a_wildcard_swallowed_gets_the_offline_reply(local, registry):
    messages = history("What is the capital of France?")
    first = complete(local, messages, registry)
    assert [c.name for c in first.tool_calls] == ["calculate"]  # "what is {expression}"
    messages += run_tools(registry, first)
    final = complete(local, messages, registry)
    assert final.tool_calls == []
    assert final.text.startswith("Sorry, I can't answer that offline.")


def test_an_unmatched_sentence_gets_the_offline_reply(local, registry):
    answer = complete(local, history("tell me a story about dragons"), registry)
    assert answer.tool_calls == []
    assert answer.text.startswith("Sorry, I can't answer that offline.")
    assert local.handles(history("tell me a story about dragons"), registry.schemas()) is False


def test_only_offered_tools_are_called(local, registry):
    offered = [registry.get("get_weather").schema]
    answer = local.complete(history("what time is it"), offered, deadline=time.time() + 5)
    assert answer.tool_calls == []
    assert "can't answer that offline" in answer.text


def test_on_text_hears_the_final_text(local, registry):
    heard: list[str] = []
    local.complete(
        history("tell me a joke"),
        registry.schemas(),
        deadline=time.time() + 5,
        on_text=heard.append,
    )
    assert heard and heard[0].startswith("Sorry")


# -- prefer local --------------------------------------------------------------------------
class RecordingLLM:
    """A stand-in for the remote LLM provider: answers with fixed text, records calls."""

    name = "remote"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        deadline: float,
        on_text: Callable[[str], None] | None = None,
    ) -> Answer:
        self.seen.append(messages)
        return Answer(text="from the LLM")


def test_prefer_local_answers_commands_locally_and_the_rest_remotely(local, registry):
    remote = RecordingLLM()
    model = PreferLocal(local, remote)
    assert model.name == "local+remote"
    messages = history("what time is it in Tokyo")
    first = complete(model, messages, registry)
    assert [c.name for c in first.tool_calls] == ["get_current_time"]
    messages += run_tools(registry, first)
    assert complete(model, messages, registry).text == "noon in Tokyo"
    assert remote.seen == []
    # Next turn of the same session: not a command, so the LLM, with the whole history.
    messages += [msg.assistant("noon in Tokyo"), msg.user("tell me a story about dragons")]
    assert complete(model, messages, registry).text == "from the LLM"
    assert remote.seen[-1] == messages


def test_prefer_local_hands_a_failed_command_to_the_llm(local, registry):
    remote = RecordingLLM()
    model = PreferLocal(local, remote)
    messages = history("calculate the meaning of life")
    first = complete(model, messages, registry)
    assert [c.name for c in first.tool_calls] == ["calculate"]
    messages += run_tools(registry, first)
    assert complete(model, messages, registry).text == "from the LLM"
    assert remote.seen[-1][-1]["content"].startswith("Error")


def test_results_of_the_llm_own_calls_go_back_to_the_llm(local, registry):
    remote = RecordingLLM()
    model = PreferLocal(local, remote)
    messages = [
        *history("do something clever"),
        msg.assistant_tool_calls([{"id": "call_1", "name": "get_current_time", "arguments": "{}"}]),
        msg.tool_result("call_1", "noon in UTC"),
    ]
    assert complete(model, messages, registry).text == "from the LLM"


def test_select_chat_model_wraps_openai_in_prefer_local(registry):
    from workers.agent.providers import select_chat_model

    key = SecretStr("sk-test")
    on = Settings(providers=ProviderSettings(llm="openai", openai_api_key=key))
    assert isinstance(select_chat_model(on, registry), PreferLocal)
    off = Settings(providers=ProviderSettings(llm="openai", openai_api_key=key, prefer_local=False))
    assert select_chat_model(off, registry).name == "openai"
    offline = Settings(providers=ProviderSettings(llm="auto"))
    assert isinstance(select_chat_model(offline, registry), LocalIntents)


def test_tool_call_requests_carry_valid_json(local, registry):
    answer = complete(local, history("roll three dice"), registry)
    (call,) = answer.tool_calls
    assert isinstance(call, ToolCallRequest)
    assert json.loads(call.arguments) == {"count": 3}


@pytest.mark.parametrize("message", [
    # The weather tool with no internet (#48): the host and the errno were read aloud.
    "Error: get_weather failed: ConnectionError: cannot resolve host "
    "'geocoding-api.open-meteo.com': [Errno -2] Name or service not known",
    "Error: fetch_page failed: ConnectError: [Errno 111] Connection refused",
    "Error: get_news failed: ReadTimeout: timed out",
])
def test_a_service_out_of_reach_is_said_plainly(message):
    said = apology(message)
    assert said == "Sorry, I can't reach that service right now."
    assert "Errno" not in said and "open-meteo" not in said
    assert apology(message, "the weather service") == (
        "Sorry, I can't reach the weather service right now.")


@pytest.mark.parametrize(("message", "said"), [
    ("Error: wikipedia_summary failed: RuntimeError: Wikipedia answered HTTP 503",
     "Sorry, Wikipedia isn't answering right now."),
    ("Error: wikipedia_summary failed: RuntimeError: Wikipedia answered HTTP 429",
     "Sorry, Wikipedia isn't answering right now."),
    ("Error: wikipedia_summary failed: RuntimeError: Wikipedia answered HTTP 403",
     "Sorry, Wikipedia turned that request down."),
])
def test_a_service_that_fails_is_named_not_its_status(message, said):
    assert apology(message, "Wikipedia") == said


def test_a_web_address_is_not_read_aloud():
    said = apology("Error: fetch_url failed: ValueError: https://example.com/a?b=1 is an image, "
                   "not a page with text")
    assert said == "Sorry, that didn't work: it is an image, not a page with text."


def test_the_built_in_network_tools_name_their_service():
    from workers.tool_registry.registry import Tool
    from workers.tools.builtin import weather
    assert Tool.from_function(weather.get_weather).service == "the weather service"
    assert Tool.from_function(weather.get_forecast).service == "the weather service"


def test_an_error_number_is_not_read_aloud():
    assert apology("Error: read_file failed: OSError: [Errno 28] No space left on device") == (
        "Sorry, that didn't work: No space left on device.")
