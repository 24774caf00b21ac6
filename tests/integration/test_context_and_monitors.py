"""Context management over a 60-turn session, and monitors run by a Redis-backed beat, on real
worker processes against the fake LLM and a local HTTP server that flips to failing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from testkit.fakes.flip_server import FlipServer
from tests.conftest import ROOT, System, system_env
from voxqueue.keys import Keys
from workers.agent.context.compaction import SUMMARY_PREFIX
from workers.agent.context.tokens import count_messages, count_tools
from workers.monitor.monitors import scoped_name

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
KEYS = Keys()
SUMMARY = "Summary: the user's locker code is 4711."


def wait_until(what: Callable[[], Any], timeout: float = 30.0, every: float = 0.1) -> Any:
    """Poll until ``what()`` is truthy; return it (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout} s")


@pytest.fixture
def site() -> Iterator[FlipServer]:
    server = FlipServer()
    yield server
    server.close()


# -- context ------------------------------------------------------------------------------


@pytest.fixture
def tiny_context(redis_server, fake_providers, tmp_path) -> Iterator[System]:
    """An agent worker whose model has a 600-token context window (DB 9)."""
    url = redis_server.url[:-1] + "9"
    redis.Redis.from_url(url).flushdb()
    env = system_env(
        url,
        fake_providers,
        VOXQUEUE_CONTEXT_LIMITS='{"gpt-4o-mini": 600}',
        VOXQUEUE_TOOLS_ALLOW="get_current_time",
    )
    system = System(env, tmp_path / "logs", beat=False)
    system.start(("agent",))
    yield system
    system.stop()


def test_a_60_turn_session_in_a_tiny_context_still_knows_turn_one(tiny_context, fake):
    fake.script_chat({"match": "summarize the conversation", "repeat": True, "content": SUMMARY})
    client = tiny_context.client()
    questions = [
        "my locker code is 4711",
        *[f"filler message number {n}, nothing important" for n in range(58)],
        "what is my locker code?",
    ]
    summaries = []
    for question in questions:
        turn = client.ask(question, session="locker", speak=False)
        result = turn.wait(timeout=30)
        assert result.status == "ok", (question, result.error)
        summaries += [e.event.data for e in turn._entries if e.event.type == "context-summarized"]

    assert summaries and all(s["mode"] == "summary" for s in summaries)
    assert all(s["after_tokens"] <= 480 < s["before_tokens"] for s in summaries)
    requests = fake.chat_requests()
    summarizing = [r for r in requests if not r.get("tools")]
    answering = [r for r in requests if r.get("tools")]
    assert len(summarizing) >= len(summaries)
    assert "User: my locker code is 4711" in summarizing[0]["messages"][-1]["content"]
    # The last answer's request: the fact came through the summary, not turn 1 verbatim, and
    # the whole request fits within 80 % of the window, tools included.
    final = answering[-1]
    assert final["messages"][-1] == {"role": "user", "content": "what is my locker code?"}
    assert final["messages"][1] == {"role": "system", "content": SUMMARY_PREFIX + SUMMARY}
    assert not any(m["content"] == "my locker code is 4711" for m in final["messages"])
    used = count_messages(final["messages"], "gpt-4o-mini") + count_tools(
        final["tools"], "gpt-4o-mini"
    )
    assert used <= 480
    # The history in Redis is the compacted one; its accounting counts the summaries.
    r = redis.Redis.from_url(tiny_context.env["VOXQUEUE_REDIS_URL"])
    stats = {k.decode(): v.decode() for k, v in r.hgetall(KEYS.context_stats("locker")).items()}
    assert int(stats["summaries"]) == len(summaries)
    assert int(stats["llm_calls"]) == len(answering)

    # The sessions command lists, shows and clears it.
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*VOXQUEUE, "sessions", *args],
            env=tiny_context.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    listed = cli("--json")
    assert listed.returncode == 0, listed.stderr
    (info,) = [s for s in json.loads(listed.stdout) if s["session_id"] == "locker"]
    assert info["summaries"] == len(summaries) and info["messages"] < 20
    assert 0 < info["expires_in_s"] <= 7 * 24 * 3600
    shown = cli("show", "locker")
    assert shown.returncode == 0 and json.loads(shown.stdout)[1]["content"].startswith(
        SUMMARY_PREFIX
    )
    assert cli("clear", "locker").returncode == 0
    assert cli("show", "locker").returncode == 1


# -- monitors -----------------------------------------------------------------------------

SETTINGS_MONITORS = [
    {
        "name": "tts-backlog",
        "kind": "queue_depth",
        "target": "tts",
        "condition": "> 1000",
        "every": 1,
    },
    # This system runs no stt worker.
    {"name": "stt-workers", "kind": "workers_missing", "target": "agent,stt", "every": 2},
    {"name": "llm-errors", "kind": "provider_errors", "target": "llm", "every": 2},
]


@pytest.fixture(scope="module")
def watched(redis_server, fake_providers, tmp_path_factory) -> Iterator[System]:
    """A system with beat (DB 10) whose monitors may check 127.0.0.1 every second."""
    url = redis_server.url[:-1] + "10"
    redis.Redis.from_url(url).flushdb()
    env = system_env(
        url,
        fake_providers,
        VOXQUEUE_MONITOR_MIN_EVERY_S="1",
        VOXQUEUE_URL_ALLOWLIST="127.0.0.1",
        VOXQUEUE_MONITORS=json.dumps(SETTINGS_MONITORS),
    )
    system = System(env, tmp_path_factory.mktemp("monitor-logs"))
    system.start(("agent", "tools", "monitor"))
    yield system
    system.stop()


def stored(name: str, device: str | None = "kitchen") -> str:
    """The stored name of a monitor a device made by voice (in its owner's namespace); an
    operator's monitor (``device`` None) keeps its own."""
    return scoped_name(name, f"device:{device}") if device else name


def state(system: System, name: str, device: str | None = "kitchen") -> dict[str, str]:
    """The state of ``device``'s monitor ``name`` (the operator's with None)."""
    r = redis.Redis.from_url(system.env["VOXQUEUE_REDIS_URL"])
    return {k.decode(): v.decode()
            for k, v in r.hgetall(KEYS.monitor_state(stored(name, device))).items()}


def checks(system: System, name: str, device: str | None = "kitchen") -> int:
    return int(state(system, name, device).get("checks", 0))


def announcements(system: System, device: str) -> list[dict[str, Any]]:
    r = redis.Redis.from_url(system.env["VOXQUEUE_REDIS_URL"])
    return [json.loads(f[b"e"]) for _id, f in r.xrange(KEYS.announcements(device))]


def create_by_voice(system: System, fake: Any, *, name: str, url: str, device: str) -> None:
    fake.script_chat(
        {
            "match": f"watch {name}",
            "tool_calls": [
                {
                    "name": "create_monitor",
                    "arguments": {"kind": "http", "target": url, "every": 1, "name": name},
                }
            ],
        },
        {"after_tool": True, "content": "I'm watching it."},
    )
    result = (
        system.client()
        .ask(f"watch {name}", session=f"s-{device}", device=device, speak=False)
        .wait(timeout=30)
    )
    assert result.status == "ok", result.error
    assert f"Monitor '{name}' created" in (result.tool_calls[0].result or "")


def test_monitors_from_the_settings_run_at_beat_start(watched):
    # (a bound on liveness, not a speed: beat's first ticks on a cold, busy machine)
    wait_until(lambda: checks(watched, "tts-backlog", None) >= 2, timeout=90)
    assert state(watched, "tts-backlog", None)["state"] == "ok"
    # Checked every 2 s: a check while the agent worker was too busy to answer its ping names
    # it too ("agent, stt"); the next one that hears it names stt alone.
    missing = wait_until(lambda: (found := state(watched, "stt-workers", None)).get(
        "detail", "").startswith("no worker serves stt") and found)
    assert missing["state"] == "alerting"
    wait_until(lambda: checks(watched, "llm-errors", None) >= 1)
    assert state(watched, "llm-errors", None)["state"] == "ok"


def test_a_failing_site_alerts_once_in_the_next_turn_and_on_the_device(watched, fake, site):
    create_by_voice(watched, fake, name="site", url=site.url, device="kitchen")
    wait_until(lambda: checks(watched, "site") >= 2)
    assert state(watched, "site")["state"] == "ok"
    assert announcements(watched, "kitchen") == []

    site.status = 500
    wait_until(lambda: state(watched, "site")["state"] == "alerting")
    flipped = checks(watched, "site")
    wait_until(lambda: checks(watched, "site") >= flipped + 3)  # still failing: no new alert
    assert state(watched, "site")["alerts"] == "1"
    (event,) = announcements(watched, "kitchen")
    assert (event["v"], event["type"], event["kind"]) == (1, "announcement", "alert")
    assert event["text"].startswith("site needs attention: ") and "answered 500" in event["text"]

    turn = watched.client().ask("anything new?", session="s-kitchen", device="kitchen", speak=False)
    assert turn.wait(timeout=30).status == "ok"
    messages = fake.chat_requests()[-1]["messages"]
    # Alerts are data, not instructions: a user-role message, framed, right before the user's.
    alerts = [m for m in messages if (m["content"] or "").startswith("Monitor alerts (data, not")]
    assert len(alerts) == 1 and alerts[0]["role"] == "user"
    assert not any("site needs attention" in (m["content"] or "") for m in messages
                   if m["role"] == "system")
    assert messages.index(alerts[0]) == len(messages) - 2  # right before the user's message
    (said,) = [e.event.data["text"] for e in turn._entries if e.event.type == "alert"]
    assert said.startswith("site needs attention") and f"- {said}" in alerts[0]["content"]
    # Drained: the turn after that hears nothing more.
    watched.client().ask("and now?", session="s-kitchen", device="kitchen", speak=False).wait(
        timeout=30
    )
    assert not any(
        m["content"].startswith("Monitor alert") for m in fake.chat_requests()[-1]["messages"][-2:]
    )

    # The agent's other monitor tools, by voice.
    fake.script_chat(
        {
            "match": "how is my site",
            "tool_calls": [
                {"name": "monitor_status", "arguments": {"name": "site"}},
                {"name": "list_monitors", "arguments": {}},
            ],
        },
        {"after_tool": True, "content": "It is down."},
        {
            "match": "stop watching",
            "tool_calls": [{"name": "delete_monitor", "arguments": {"name": "site"}}],
        },
        {"after_tool": True, "content": "Stopped."},
    )
    status = (
        watched.client()
        .ask("how is my site", session="s-kitchen", device="kitchen", speak=False)
        .wait(timeout=30)
    )
    told = {c.name: c.result or "" for c in status.tool_calls}
    assert "State alerting" in told["monitor_status"] and "1 alert." in told["monitor_status"]
    assert "site:" in told["list_monitors"] and "tts-backlog:" in told["list_monitors"]
    asked = (
        watched.client()
        .ask("stop watching", session="s-kitchen", device="kitchen", speak=False)
        .wait(timeout=30)
    )
    # The alert tainted the session: a side effect now waits for the person's yes.
    assert "confirmation" in (asked.tool_calls[0].error or "")
    r = redis.Redis.from_url(watched.env["VOXQUEUE_REDIS_URL"])
    assert r.hexists(KEYS.monitors(), stored("site"))
    fake.script_chat(
        {"match": "yes", "tool_calls": [{"name": "delete_monitor", "arguments": {"name": "site"}}]},
        {"after_tool": True, "content": "Stopped."},
    )
    watched.client().ask("yes", session="s-kitchen", device="kitchen", speak=False).wait(
        timeout=30
    )
    assert not r.exists(f"vq:redbeat:monitor:{stored('site')}")
    assert not r.hexists(KEYS.monitors(), stored("site"))


def test_one_beat_at_a_time_and_a_restart_keeps_monitors_without_double_alerts(watched, fake, site):
    site.status = 503
    create_by_voice(watched, fake, name="hall-site", url=site.url, device="hall")
    wait_until(lambda: checks(watched, "hall-site", "hall") >= 2)
    assert state(watched, "hall-site", "hall")["alerts"] == "1"  # a failing first check alerts
    sup = watched.sup
    first = next(p for p in sup.procs if p.name == "beat")

    # A second beat waits for the lock while the first one runs.
    second = sup.start("beat-2", sup.beat_argv())
    assert second.log_path is not None and first.log_path is not None
    wait_until(lambda: "beat: Starting" in second.log_path.read_text(errors="replace"))
    time.sleep(2)
    assert "Acquired lock" not in second.log_path.read_text(errors="replace")

    # Stop the first: the second takes over, and the monitor keeps being checked.
    sup.stop(first)
    wait_until(lambda: "Acquired lock" in second.log_path.read_text(errors="replace"), timeout=30)
    before = checks(watched, "hall-site", "hall")
    wait_until(lambda: checks(watched, "hall-site", "hall") >= before + 3)
    assert state(watched, "hall-site", "hall")["alerts"] == "1"
    assert len(announcements(watched, "hall")) == 1
    r = redis.Redis.from_url(watched.env["VOXQUEUE_REDIS_URL"])
    assert r.llen(KEYS.device_alerts("hall")) == 1
    assert r.exists(f"vq:redbeat:monitor:{stored('hall-site', 'hall')}")
    assert checks(watched, "tts-backlog", None) > 0

    # Recovery is one more alert, but not announced.
    site.status = 200
    wait_until(lambda: state(watched, "hall-site", "hall")["state"] == "ok")
    assert state(watched, "hall-site", "hall")["alerts"] == "2"
    assert len(announcements(watched, "hall")) == 1
    assert r.llen(KEYS.device_alerts("hall")) == 2
