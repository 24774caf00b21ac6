"""The toolset across real worker processes: an MCP tool in a turn, and a timer that survives
a restart of the monitor worker and beat and fires exactly once.

Runs its own System on Redis DB 4 (agent, tools, monitor and beat), with the echo MCP server of
tests/mcp_servers configured, the fake LLM scripting the tool calls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import ROOT, RedisServer, System, system_env
from voxqueue.keys import Keys

pytestmark = pytest.mark.integration

QUEUES = ("agent", "tools", "monitor")
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
DEVICE = "toolset-kitchen"


def beat_argv(system: System, schedule: Path) -> list[str]:
    """Beat with a schedule file of its own (the shared system's beat has the default one)."""
    argv = system.sup.beat_argv()
    argv[argv.index("-s") + 1] = str(schedule)
    return argv


@pytest.fixture(scope="module")
def toolset(
    redis_server: RedisServer, fake_providers: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[System, Path]]:
    work = tmp_path_factory.mktemp("toolset")
    mcp_log = work / "echo-calls.jsonl"
    url = redis_server.url.rsplit("/", 1)[0] + "/4"
    redis.Redis.from_url(url).flushdb()
    servers = [
        {
            "name": "echo",
            "command": [sys.executable, str(ROOT / "tests" / "mcp_servers" / "echo_server.py")],
            "env": {"ECHO_MCP_LOG": str(mcp_log)},
        }
    ]
    env = system_env(
        url, fake_providers, VOXQUEUE_MCP_SERVERS=json.dumps(servers), VOXQUEUE_TIMEZONE="UTC"
    )
    system = System(env, work / "logs", beat=False)
    system.start(QUEUES)
    system.sup.start("beat", beat_argv(system, work / "beat-1"))
    yield system, mcp_log
    system.stop()


def events(turn, kind: str) -> list[dict]:
    return [e.event.data for e in turn._entries if e.event.type == kind]


def announcements(r: redis.Redis, device: str) -> list[dict]:
    return [json.loads(f[b"e"]) for _id, f in r.xrange(Keys().announcements(device))]


def wait_for(predicate, timeout: float, what: str):
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_tools_json_prints_only_json_and_logs_to_stderr(toolset):
    system, _log = toolset
    proc = subprocess.run([*VOXQUEUE, "tools", "--json"], env=system.env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)  # no log line before the JSON
    assert "echo" in json.dumps(listed)
    assert "MCP tools listed" in proc.stderr


def test_an_mcp_tool_runs_in_a_turn(toolset, fake):
    system, mcp_log = toolset
    fake.script_chat(
        {
            "match": "echo",
            "tool_calls": [{"name": "echo", "arguments": {"text": "hello mcp", "times": 2}}],
        },
        {"after_tool": True, "content": "The server said hello twice."},
    )
    turn = system.client().ask("please echo hello", session="toolset-mcp", speak=False)
    result = turn.wait(timeout=60)
    assert result.status == "ok", (result.error, system.logs())
    assert result.reply == "The server said hello twice."
    (end,) = events(turn, "tool-end")
    assert (
        end["name"] == "echo" and end["ok"] and end["result"] == "echo: hello mcp echo: hello mcp"
    )
    # The model was offered the MCP tool with the server's own schema...
    first = fake.chat_requests()[0]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered["echo"]["parameters"]["required"] == ["text"]
    assert {"get_weather", "set_timer", "add"} <= set(offered)
    # ...and got its result back as the tool message of the next request.
    messages = fake.chat_requests()[-1]["messages"]
    call_id = messages[-2]["tool_calls"][0]["id"]
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "echo: hello mcp echo: hello mcp",
    }
    # The MCP server process really answered.
    calls = [json.loads(line) for line in mcp_log.read_text().splitlines()]
    assert {"tool": "echo", "arguments": {"text": "hello mcp", "times": 2}} in [
        {k: c[k] for k in ("tool", "arguments")} for c in calls
    ]


def test_an_mcp_server_is_started_once_and_again_after_it_dies(toolset, fake):
    system, mcp_log = toolset

    def call(tool: str, arguments: dict, session: str) -> dict:
        fake.script_chat(
            {"match": session, "tool_calls": [{"name": tool, "arguments": arguments}]},
            {"after_tool": True, "content": "Done."},
        )
        result = system.client().ask(f"{session} please", session=session, speak=False).wait(60)
        assert result.status == "ok", result.error
        (outcome,) = result.tool_calls
        return {"ok": not outcome.error, "text": outcome.result or outcome.error}

    def server_pids() -> list[int]:
        return [json.loads(line)["pid"] for line in mcp_log.read_text().splitlines()]

    first = call("echo", {"text": "one"}, "mcp-keep-1")
    second = call("echo", {"text": "two"}, "mcp-keep-2")
    assert first["ok"] and second["ok"]
    pid = server_pids()[-1]
    assert server_pids()[-2] == pid, "each call started the server afresh"

    os.kill(pid, signal.SIGKILL)
    # A tool that may change something is not called again blindly: the model hears why...
    lost = call("echo", {"text": "three"}, "mcp-keep-3")
    assert not lost["ok"] and "Connection closed" in lost["text"], lost
    # ...and the next call gets a new server.
    fourth = call("echo", {"text": "four"}, "mcp-keep-4")
    assert fourth["ok"] and server_pids()[-1] != pid

    os.kill(server_pids()[-1], signal.SIGKILL)
    # A read-only tool is simply called again on a new server.
    answered = call("server_pid", {}, "mcp-keep-5")
    assert answered["ok"] and int(answered["text"]) not in (pid, server_pids()[-2])


def test_a_timer_survives_a_restart_and_fires_exactly_once(toolset, fake, tmp_path):
    system, _ = toolset
    r = redis.Redis.from_url(system.env["VOXQUEUE_REDIS_URL"])
    sup = system.sup
    fake.script_chat(
        {
            "match": "tea timer",
            "tool_calls": [
                {"name": "set_timer", "arguments": {"duration": "six seconds", "label": "tea"}}
            ],
        },
        {"after_tool": True, "content": "Tea timer set."},
    )
    result = (
        system.client()
        .ask("set a tea timer", session="toolset-timer", device=DEVICE, speak=False)
        .wait(timeout=60)
    )
    assert result.status == "ok", (result.error, system.logs())
    assert (result.tool_calls[0].result or "").startswith("Tea timer set for 6 seconds")
    # Every worker and beat down (any worker process fires timers): nothing can fire.
    for proc in [p for p in sup.procs if p.name.startswith("worker") or p.name == "beat"]:
        sup.stop(proc)
    ((_, due),) = r.zrange(Keys().timers_due(), 0, 0, withscores=True)
    time.sleep(max(0.0, due - time.time()) + 0.5)  # until it is past due, while nothing sweeps
    assert announcements(r, DEVICE) == []
    assert r.zcard(Keys().timers_due()) == 1
    # Back up, twice over: every worker, a second monitor worker and two beats at once.
    sup.start_workers(queues=QUEUES)
    sup.start("worker-monitor-2", sup.worker_argv(["monitor"], name="monitor2", concurrency=2))
    sup.start("beat", beat_argv(system, tmp_path / "beat-2"))
    sup.start("beat-2", beat_argv(system, tmp_path / "beat-3"))
    wait_for(lambda: announcements(r, DEVICE), 30, "the timer's announcement")
    # Firing takes the item out of the due set in the script that announces it: with the set
    # empty, no process can fire it again.
    assert r.zcard(Keys().timers_due()) == 0
    fired = announcements(r, DEVICE)
    assert len(fired) == 1, fired
    (event,) = fired
    assert event["type"] == "announcement" and event["kind"] == "timer"
    assert event["text"] == "Your tea timer is done." and event["v"] == 1
    assert event["ts"] >= event["due"]
    assert r.zcard(Keys().timers_due()) == 0
    for name in ("worker-monitor-2", "beat-2"):
        sup.stop(next(p for p in sup.procs if p.name == name))
