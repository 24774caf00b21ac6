"""The registry the workers build: built-ins, allow/deny, plugins, MCP servers, the listing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import docstring_parser
import pytest

from tests.conftest import ROOT, free_port
from tests.unit.runtimes import installed
from voxqueue.settings import RedisSettings, Settings, ToolSettings
from workers.tool_registry.assembly import assemble_tools
from workers.tool_registry.context import ToolCall
from workers.tool_registry.listing import print_tools
from workers.tool_registry.mcp_tools import McpServer, _tool_name, mcp_tools
from workers.tool_registry.plugins import load_entry_points
from workers.tool_registry.registry import ToolRegistry, ToolReply
from workers.tools.executor import run_tool_call
from workers.wiring import runtime_for

ECHO_SERVER = str(ROOT / "tests" / "mcp_servers" / "echo_server.py")
SIDE_EFFECTS = {
    "set_timer",
    "cancel_timer",
    "set_reminder",
    "remember",
    "forget",
    "send_notification",
    "home_assistant_call",
    "create_monitor",
    "delete_monitor",
}
BUILTINS = {
    "create_monitor",
    "list_monitors",
    "monitor_status",
    "delete_monitor",
    "get_current_time",
    "convert_time",
    "days_until",
    "calculate",
    "convert_units",
    "set_timer",
    "list_timers",
    "cancel_timer",
    "set_reminder",
    "remember",
    "recall",
    "forget",
    "get_weather",
    "get_forecast",
    "wikipedia_summary",
    "fetch_url",
    "news_headlines",
    "home_assistant_call",
    "home_assistant_state",
    "send_notification",
    "system_status",
    "roll_dice",
    "flip_coin",
    "random_number",
}


def settings(**tools) -> Settings:
    return Settings(tools=ToolSettings(**tools))


def echo_server(**extra) -> dict:
    return {"name": "echo", "command": [sys.executable, ECHO_SERVER], **extra}


def call(registry: ToolRegistry, name: str, args: dict | str):
    raw = args if isinstance(args, str) else json.dumps(args)
    turn = uuid.uuid4().hex[:8]  # a turn (and session) of its own: not tainted by the last
    return run_tool_call(
        registry, ToolCall(turn, turn, None, f"c-{name}", name), raw, timeout_s=15, max_chars=4000
    )


@pytest.fixture(autouse=True)
def turn_state(redis_server):
    """A tool that reads untrusted content (every MCP tool) taints its turn in Redis."""
    url = redis_server.url.rsplit("/", 1)[0] + "/3"
    prefix = f"vqr-{uuid.uuid4().hex[:8]}"
    rt = runtime_for(Settings(redis=RedisSettings(url=url, key_prefix=prefix)))
    with installed(rt):
        yield rt


@pytest.fixture(scope="module")
def builtin() -> ToolRegistry:
    return assemble_tools(settings())


def test_every_builtin_is_offered(builtin):
    assert set(builtin.names) == BUILTINS


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_builtin_is_documented_with_examples(builtin, name):
    tool = builtin.get(name)
    params = set(tool.args_model.model_fields)
    doc = docstring_parser.parse(tool.fn.__doc__ or "")
    assert tool.description and not tool.description.startswith(name)
    assert {p.arg_name for p in doc.params} == params, "every argument in Args:"
    assert 2 <= len(tool.examples) <= 4
    for example in tool.examples:
        assert set(re.findall(r"\{(\w+)\}", example)) <= params, example
    assert tool.side_effects == (name in SIDE_EFFECTS)
    assert tool.fn.__annotations__.get("return") in ("str", str, "ToolReply", ToolReply)


def test_allow_and_deny_lists():
    only = assemble_tools(settings(allow="get_weather, calculate,flip_coin"))
    assert only.names == ["calculate", "flip_coin", "get_weather"]
    without = assemble_tools(settings(deny="fetch_url,home_assistant_call"))
    assert "fetch_url" not in without.names and "home_assistant_call" not in without.names
    assert "get_weather" in without.names
    both = assemble_tools(settings(allow="calculate,flip_coin", deny="flip_coin"))
    assert both.names == ["calculate"]


# -- plugins ------------------------------------------------------------------------------------
@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """An "installed" plugin distribution: a dist-info with entry points on sys.path."""
    (tmp_path / "vq_demo_plugin.py").write_text('''
from workers.tools import tool

@tool(examples=("say hello to {who}", "greet {who}"))
def greet(who: str) -> str:
    """Greet someone.

    Args:
        who: The name.
    """
    return f"Hello {who}!"


def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def whisper(text: str) -> str:
    """Whisper.

    Args:
        text: What to whisper.
    """
    return text.lower()

PAIR = [shout, whisper]
''')
    info = tmp_path / "vq_demo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vq-demo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[voxqueue.tools]\n"
        "demo_module = vq_demo_plugin\n"
        "demo_pair = vq_demo_plugin:PAIR\n"
        "broken = vq_no_such_module:thing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("vq_demo_plugin", None)


def test_entry_point_plugins_are_loaded(plugin_dist):
    registry = ToolRegistry()
    added = load_entry_points(registry)
    assert {t.name for t in added} >= {"greet", "shout", "whisper"}
    assert call(registry, "greet", {"who": "Ada"}).content == "Hello Ada!"
    assert registry.get("greet").examples == ("say hello to {who}", "greet {who}")
    full = assemble_tools(settings())
    assert {"greet", "shout", "whisper", "get_weather"} <= set(full.names)


# -- MCP ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def with_mcp() -> ToolRegistry:
    return assemble_tools(settings(mcp_servers=[echo_server()]))


def test_mcp_tools_appear_like_builtins(with_mcp):
    assert {"echo", "add", "shout_fail"} <= set(with_mcp.names)
    assert set(with_mcp.names) >= BUILTINS
    schema = with_mcp.get("echo").schema["function"]
    assert schema["description"] == "Repeat the text back, `times` times."
    assert schema["parameters"]["properties"]["text"]["type"] == "string"
    assert schema["parameters"]["required"] == ["text"]
    assert with_mcp.get("echo").side_effects  # no readOnlyHint: treated as changing things
    assert with_mcp.get("echo").reads_untrusted and with_mcp.get("add").reads_untrusted


def test_mcp_tool_calls_run_on_the_server(with_mcp):
    done = call(with_mcp, "echo", {"text": "hi", "times": 2})
    assert done.ok and done.content == "echo: hi echo: hi"
    assert call(with_mcp, "echo", {"text": "once"}).content == "echo: once"
    assert call(with_mcp, "add", {"a": 2, "b": 0.5}).content == "2.5"


def test_mcp_errors_reach_the_model(with_mcp):
    failed = call(with_mcp, "shout_fail", {"reason": "not today"})
    assert not failed.ok and "refused: not today" in failed.content
    invalid = call(with_mcp, "add", {"a": 1})
    assert not invalid.ok and "invalid arguments for add: b: Field required" in invalid.content
    extra = call(with_mcp, "echo", {"text": "x", "loud": True})
    assert not extra.ok and "loud" in extra.content


def test_a_slow_mcp_call_times_out_and_the_session_stays_usable():
    registry = assemble_tools(settings(mcp_servers=[echo_server(timeout_s=0.5)]))
    late = call(registry, "slow", {"seconds": 5})
    assert not late.ok and late.error_code == "timeout" and "within 0.5 s" in late.content
    assert call(registry, "echo", {"text": "still here"}).content == "echo: still here"


def test_unreachable_mcp_server_is_skipped():
    registry = assemble_tools(
        settings(
            mcp_servers=[
                {"name": "gone", "command": [sys.executable, "-c", "import sys; sys.exit(3)"]},
                {"name": "bad entry"},  # neither command nor url
                echo_server(prefix=True),
            ]
        )
    )
    assert {"echo_echo", "echo_add"} <= set(registry.names)
    assert "get_weather" in registry.names


def test_tool_names_are_made_unique_and_valid():
    server = McpServer(name="files", command=["x"])
    assert _tool_name(server, "read.file", set()) == "read_file"
    assert _tool_name(server, "get_weather", {"get_weather"}) == "files_get_weather"
    with pytest.raises(ValueError, match="exactly one"):
        McpServer(name="both", command=["x"], url="http://127.0.0.1/mcp")


def test_mcp_over_streamable_http():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, ECHO_SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        tools: list = []
        give_up = time.time() + 20
        while not tools and time.time() < give_up:
            tools = mcp_tools(settings(mcp_servers=[{"name": "web", "url": url}]))
            time.sleep(0.2)
        registry = ToolRegistry(tools)
        assert {"echo", "add", "shout_fail", "slow", "server_pid"} == set(registry.names)
        assert call(registry, "echo", {"text": "over http"}).content == "echo: over http"
    finally:
        proc.terminate()
        proc.wait(10)


# -- listing ------------------------------------------------------------------------------------
def test_print_tools_json(capsys, builtin):
    print_tools(as_json=True, registry=builtin)
    schemas = json.loads(capsys.readouterr().out)
    assert {s["function"]["name"] for s in schemas} == BUILTINS
    assert all(s["type"] == "function" for s in schemas)


def test_print_tools_table(capsys, builtin):
    print_tools(as_json=False, registry=builtin)
    out = capsys.readouterr().out
    assert "28 tools" in out
    for name in ("set_timer", "get_weather", "roll_dice"):
        assert name in out
    assert "duration" in out
