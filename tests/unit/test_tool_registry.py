"""Tools from plain functions: schema from hints and docstrings; every failure as a message."""

from __future__ import annotations

import json
import time
from typing import Annotated, Literal

import pytest
from pydantic import Field

from workers.tool_registry.context import ToolCall, current_call
from workers.tool_registry.registry import Tool, ToolRegistry, tool
from workers.tools.executor import run_tool_call


def forecast(city: str, days: int = 3, units: Literal["metric", "imperial"] = "metric") -> str:
    """Get the weather forecast.

    Longer explanation.

    Args:
        city: The city name.
        days: How many days ahead.
        units: Unit system.
    """
    return f"{city}:{days}:{units}"


def bounded(n: Annotated[int, Field(ge=1, le=10, description="A small number")]) -> int:
    """Double a small number."""
    return n * 2


def slow(seconds: float) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "done"


def broken() -> str:
    """Always fails."""
    raise ValueError("the widget is unplugged")


def context_probe() -> str:
    """Return the current call."""
    call = current_call()
    return f"{call.session_id}:{call.call_id}" if call else "none"


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([Tool.from_function(f)
                         for f in (forecast, bounded, slow, broken, context_probe)])


def call(name: str) -> ToolCall:
    return ToolCall(turn_id="t1", session_id="s1", device=None, call_id="c1", name=name)


def test_schema_comes_from_name_docstring_and_hints():
    schema = Tool.from_function(forecast).schema
    fn = schema["function"]
    assert schema["type"] == "function"
    assert fn["name"] == "forecast"
    assert fn["description"] == "Get the weather forecast. Longer explanation."
    params = fn["parameters"]
    assert params["required"] == ["city"]
    assert params["properties"]["city"] == {"type": "string", "description": "The city name."}
    assert params["properties"]["days"]["default"] == 3
    assert params["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert params["additionalProperties"] is False
    json.dumps(schema)  # JSON-serializable


def test_annotated_field_constraints_reach_the_schema():
    props = Tool.from_function(bounded).schema["function"]["parameters"]["properties"]["n"]
    assert props["minimum"] == 1 and props["maximum"] == 10
    assert props["description"] == "A small number"


def test_decorator_options_and_untyped_parameters():
    @tool(name="renamed", timeout_s=2, side_effects=True, examples=["do {x}"])
    def f(x: str) -> str:
        """Do x."""
        return x

    t = Tool.from_function(f)
    assert (t.name, t.timeout_s, t.side_effects, t.examples) == ("renamed", 2, True, ("do {x}",))

    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(TypeError, match="needs a type hint"):
        Tool.from_function(untyped)


def test_valid_call_runs(registry):
    out = run_tool_call(registry, call("forecast"), '{"city": "Paris", "days": 2}',
                        timeout_s=5, max_chars=1000)
    assert out.ok and out.content == "Paris:2:metric"
    assert out.arguments == {"city": "Paris", "days": 2}


@pytest.mark.parametrize(("name", "args", "code", "fragment"), [
    ("nope", "{}", "unknown-tool", "no tool named 'nope'"),
    ("forecast", '{"city": ', "invalid-json", "not valid JSON"),
    ("forecast", "[1, 2]", "invalid-json", "must be a JSON object"),
    ("forecast", '{"days": 2}', "invalid-arguments", "city: Field required"),
    ("forecast", '{"city": "x", "units": "kelvin"}', "invalid-arguments", "units"),
    ("forecast", '{"city": "x", "extra": 1}', "invalid-arguments", "extra"),
    ("bounded", '{"n": 50}', "invalid-arguments", "less than or equal to 10"),
    ("broken", "{}", "tool-exception", "the widget is unplugged"),
    ("slow", '{"seconds": 2}', "timeout", "did not finish within 0.2 s"),
])
def test_every_failure_is_a_message_the_model_can_act_on(registry, name, args, code, fragment):
    out = run_tool_call(registry, call(name), args, timeout_s=0.2, max_chars=1000)
    assert not out.ok
    assert out.error_code == code
    assert fragment in out.content
    assert out.content.startswith("Error")
    assert out.call_id == "c1"


def test_unknown_tool_lists_the_real_ones(registry):
    out = run_tool_call(registry, call("nope"), "{}", timeout_s=1, max_chars=1000)
    assert "forecast" in out.content and "bounded" in out.content


def test_long_results_are_truncated_with_a_note(registry):
    out = run_tool_call(registry, call("forecast"), json.dumps({"city": "x" * 500}),
                        timeout_s=1, max_chars=100)
    assert out.ok and len(out.content) < 300
    assert "truncated" in out.content


def test_tools_see_their_call_context(registry):
    out = run_tool_call(registry, call("context_probe"), "{}", timeout_s=1, max_chars=100)
    assert out.content == "s1:c1"


def test_builtin_registry_and_user_modules(monkeypatch):
    from voxqueue.settings import Settings, ToolSettings
    from workers.tool_registry.assembly import assemble_tools

    reg = assemble_tools(Settings(tools=ToolSettings(modules="testkit.probe_tools")))
    assert {"get_current_time", "calculate", "sleep_one", "add_numbers"} <= set(reg.names)
