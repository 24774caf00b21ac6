"""Checks against a real local HTTP server and real Redis, alerts on state changes only, and
the monitors' beat entries in Redis (celery-redbeat)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from testkit.fakes.flip_server import FlipServer
from voxqueue.celery_config import make_celery
from voxqueue.contracts import TurnEvent
from voxqueue.settings import RedisSettings, Settings, ToolSettings
from workers.housekeeping.beat_scheduler import beat_config
from workers.monitor.alerts import Alerter
from workers.monitor.checks import CheckResult, provider_error_rate, run_check
from workers.monitor.monitors import Monitor, MonitorStore
from workers.monitor.run import sync_monitors
from workers.monitor.schedule import (
    RUN_CHECK,
    is_scheduled,
    schedule_monitor,
    unschedule_monitor,
)
from workers.runtime.resources import Runtime
from workers.wiring import runtime_for

DB = 10


@pytest.fixture
def site() -> Iterator[FlipServer]:
    server = FlipServer()
    yield server
    server.close()


@pytest.fixture
def rt(redis_server) -> Runtime:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    return runtime_for(
        Settings(
            redis=RedisSettings(url=url),
            tools=ToolSettings(url_allowlist="127.0.0.1", fetch_timeout_s=2.0))
    )


def test_http_check_reads_status_latency_and_text(rt, site):
    monitor = Monitor(name="site", kind="http", target=site.url, every=5)
    ok = run_check(monitor, rt)
    assert ok.state == "ok" and ok.value == 200
    assert ok.detail.startswith(f"{site.url} answered 200 in ")
    site.status = 503
    down = run_check(monitor, rt)
    assert down.state == "alerting" and down.value == 503
    assert "(alert when status >= 400)" in down.detail
    site.status, site.delay = 200, 0.3
    slow = Monitor(
        name="slow",
        kind="http",
        target=site.url,
        every=5,
        condition="latency > 200 or not contains good",
    )
    assert run_check(slow, rt).state == "alerting"
    site.delay, site.body = 0.0, b"maintenance"
    assert run_check(slow, rt).state == "alerting"
    site.body = b"all good"
    assert run_check(slow, rt).state == "ok"


def test_an_unreachable_site_is_alerting_and_a_blocked_one_an_error(rt, site):
    site.close()
    gone = run_check(Monitor(name="gone", kind="http", target=site.url, every=5), rt)
    assert gone.state == "alerting" and "did not answer" in gone.detail
    private = Monitor(name="meta", kind="http", target="http://169.254.169.254/latest", every=5)
    blocked = run_check(private, rt)
    assert blocked.state == "error" and "refusing" in blocked.detail


def test_json_check_compares_a_value_with_a_threshold(rt, site):
    monitor = Monitor(
        name="btc", kind="json", target=site.url, every=5, condition="bitcoin.usd > 70000"
    )
    site.body = json.dumps({"bitcoin": {"usd": 69000}}).encode()
    below = run_check(monitor, rt)
    assert below.state == "ok" and below.value == 69000
    assert below.detail == "bitcoin.usd is 69000"
    site.body = json.dumps({"bitcoin": {"usd": 71000.5}}).encode()
    above = run_check(monitor, rt)
    assert above.state == "alerting" and above.value == 71000.5
    site.body = json.dumps({"ethereum": {}}).encode()
    missing = run_check(monitor, rt)
    assert missing.state == "error" and "missing 'bitcoin'" in missing.detail
    site.body = b"not json at all"
    assert run_check(monitor, rt).state == "error"


def test_queue_depth_counts_waiting_jobs(rt):
    monitor = Monitor(
        name="tts-backlog", kind="queue_depth", target="tts", every=5, condition="> 2"
    )
    assert run_check(monitor, rt) == CheckResult("ok", 0, "0 jobs waiting in the tts queue")
    rt.redis.lpush("tts", *[b"job"] * 3)
    result = run_check(monitor, rt)
    assert result.state == "alerting" and result.value == 3


def _ended(rt: Runtime, turn_id: str, status: str, code: str | None = None) -> None:
    if code is not None:
        ev = TurnEvent(type="error", turn_id=turn_id, data={"code": code, "message": "x"})
        rt.redis.xadd(rt.keys.events(turn_id), {"e": ev.model_dump_json()})
        pcm = TurnEvent(type="tts-chunk", turn_id=turn_id)
        rt.redis.xadd(rt.keys.events(turn_id), {"e": pcm.model_dump_json(), "pcm": b"\0" * 64})
    rt.redis.xadd(rt.keys.ended_turns(), {"turn_id": turn_id, "status": status})


def test_provider_error_rate_over_recent_turns(rt):
    _ended(rt, "t1", "ok")
    _ended(rt, "t2", "error", "llm-failed")
    _ended(rt, "t3", "error", "tts-failed")
    _ended(rt, "t4", "error", "missing-key")  # configuration, not a provider failure
    assert provider_error_rate(rt, "", 300) == (0.5, 2, 4)
    assert provider_error_rate(rt, "llm", 300) == (0.25, 1, 4)
    monitor = Monitor(
        name="llm-errors", kind="provider_errors", target="llm", every=5, condition="> 0.2"
    )
    result = run_check(monitor, rt)
    assert result.state == "alerting" and result.value == 0.25
    assert "failed 1 of 4 turns" in result.detail
    later = time.time() + 1.1
    assert provider_error_rate(rt, "", 1, clock=lambda: later) == (0.0, 0, 0)  # past the window


def test_alerts_fire_on_changes_of_state_only(rt):
    monitor = Monitor(
        name="site",
        kind="http",
        target="http://127.0.0.1:1/",
        every=5,
        session_id="s1",
        device="kitchen",
    )
    store = MonitorStore(rt.redis, rt.keys)
    store.save(monitor)
    alerter = Alerter(rt.redis, rt.keys, 3600)
    ok = CheckResult("ok", 200, "answered 200")
    bad = CheckResult("alerting", 500, "answered 500 (alert when status >= 400)")

    def alerts() -> list[str]:
        return [a.decode() for a in rt.redis.lrange(rt.keys.device_alerts("kitchen"), 0, -1)]

    def announced() -> list[dict[str, Any]]:
        entries = rt.redis.xrange(rt.keys.announcements("kitchen"))
        return [json.loads(fields[b"e"]) for _id, fields in entries]

    assert not alerter.record(monitor, ok).alerted  # a healthy first check is the baseline
    assert not alerter.record(monitor, ok).alerted
    first = alerter.record(monitor, bad)
    assert first.alerted and (first.old, first.new) == ("ok", "alerting")
    assert not alerter.record(monitor, bad).alerted
    assert not alerter.record(monitor, bad).alerted
    assert alerts() == ["site needs attention: answered 500 (alert when status >= 400)."]
    (event,) = announced()
    assert event["v"] == 1 and event["type"] == "announcement" and event["kind"] == "alert"
    assert event["text"] == alerts()[0] and event["ts"] == pytest.approx(time.time(), abs=5)
    assert rt.redis.llen(rt.keys.alerts("s1")) == 0  # the device's list, not the session's
    recovered = alerter.record(monitor, ok)
    assert recovered.alerted and alerts()[-1].startswith("site is back to normal")
    assert len(announced()) == 1  # recovery is not urgent
    state = store.state("site")
    assert (state.state, state.checks, state.alerts, state.value) == ("ok", 6, 2, 200)

    quiet = monitor.model_copy(update={"name": "quiet", "urgent": False, "device": None})
    store.save(quiet)
    assert alerter.record(quiet, bad).alerted  # a failing first check alerts
    assert rt.redis.lrange(rt.keys.alerts("s1"), 0, -1) == [
        b"quiet needs attention: answered 500 (alert when status >= 400)."
    ]
    assert len(announced()) == 1
    store.delete("quiet")
    assert not alerter.record(quiet, ok).alerted  # deleted meanwhile: nothing recorded
    assert not rt.redis.exists(rt.keys.monitor_state("quiet"))


@pytest.fixture
def beat_app(rt) -> Iterator[Celery]:
    app = make_celery(rt.settings, "monitor-test")
    app.conf.update(beat_config(rt.settings))
    yield app
    app.close()


def test_monitors_get_beat_entries_in_redis(rt, beat_app):
    monitor = Monitor(name="site", kind="http", target="https://example.com", every=7)
    schedule_monitor(beat_app, monitor)
    assert is_scheduled(beat_app, "site")
    raw = rt.redis.hget("vq:redbeat:monitor:site", "definition")
    definition = json.loads(raw)
    assert definition["task"] == RUN_CHECK and definition["args"] == ["site"]
    assert definition["schedule"]["every"] == 7
    schedule_monitor(beat_app, monitor)  # idempotent
    assert rt.redis.zcard("vq:redbeat::schedule") == 1
    unschedule_monitor(beat_app, "site")
    assert not is_scheduled(beat_app, "site")
    assert not rt.redis.exists("vq:redbeat:monitor:site")


def test_settings_monitors_are_synced_idempotently(rt, beat_app):
    store = MonitorStore(rt.redis, rt.keys)
    mine = Monitor(name="mine", kind="queue_depth", every=30, device="kitchen")
    store.save(mine)  # made by the agent before beat started, never scheduled
    wanted = [
        {
            "name": "backlog",
            "kind": "queue_depth",
            "target": "tts",
            "every": 5,
            "device": "kitchen",
        },
        {"name": "mine", "kind": "queue_depth", "every": 5},  # taken by the agent's
        {"name": "broken", "kind": "http", "target": "ftp://x", "every": 5},
    ]
    settings = rt.settings.replace(monitors={"configured": wanted})
    rt2 = runtime_for(settings)
    assert sync_monitors(beat_app, rt2) == ["backlog", "mine"]
    assert {m.name: m.origin for m in store.all()} == {"backlog": "settings", "mine": "tool"}
    assert store.get("mine") == mine
    assert is_scheduled(beat_app, "backlog") and is_scheduled(beat_app, "mine")
    rt.redis.hset(rt.keys.monitor_state("backlog"), mapping={"state": "ok", "checks": 3})
    sync_monitors(beat_app, rt2)
    assert store.state("backlog").checks == 3  # state kept
    # Dropped from the settings: deleted and unscheduled; the agent's monitor stays.
    sync_monitors(beat_app, runtime_for(settings.replace(monitors={"configured": []})))
    assert [m.name for m in store.all()] == ["mine"]
    assert not is_scheduled(beat_app, "backlog")


def test_a_worker_that_answers_late_is_not_reported_missing(rt, monkeypatch):
    """The first ask gives up after 1 s; a queue counts as unserved only if a second, longer
    ask finds no worker either."""
    from workers.monitor import checks

    asked: list[float] = []

    def live_workers(_rt, timeout_s: float = 1.0):
        asked.append(timeout_s)
        late = {"agent": 1} if timeout_s > 1 else {}  # the agent worker answers after 1 s
        return {"agent": 0, "stt": 0, **late}

    monkeypatch.setattr("workers.tool_registry.probes.live_workers", live_workers)
    monitor = Monitor(name="w", kind="workers_missing", target="agent,stt", every=5)
    result = checks.run_check(monitor, rt)
    assert result.state == "alerting" and result.detail.startswith("no worker serves stt ")
    assert asked == [1.0, checks.SLOW_REPLY_S]
