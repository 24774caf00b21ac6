"""Whose state a tool touches: owners carry their kind, monitors belong to their owner and are
rate-limited, settings monitors are known from the settings only, and Home Assistant is
reached only through its allow-lists. Real Redis, local HTTP fakes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from testkit.fakes.flip_server import FlipServer
from testkit.fakes.http_services import FakeServices
from tests.unit.runtimes import installed
from voxqueue.observability.doctor import family_of
from voxqueue.settings import MonitorSettings, RedisSettings, Settings
from workers.monitor import tools as monitor_tools
from workers.monitor.checks import run_check
from workers.monitor.monitors import Monitor, MonitorStore, from_settings, scoped_name
from workers.runtime.resources import Runtime
from workers.tool_registry.context import ToolCall, owner, set_current_call, use_runtime
from workers.tool_registry.timer_store import TimerStore
from workers.tools.builtin import home, memory, timers
from workers.wiring import runtime_for

DB = 13
OPS = {"name": "ops-backlog", "kind": "queue_depth", "target": "tts", "every": 30}


@pytest.fixture(scope="module")
def services() -> Iterator[FakeServices]:
    with FakeServices() as fake:
        yield fake


def make_runtime(redis_server, services: FakeServices, **extra) -> Runtime:
    url = redis_server.url.rsplit("/", 1)[0] + f"/{DB}"
    monitors = {"configured": [OPS]} | {
        name: extra.pop(name) for name in list(extra) if name in MonitorSettings.model_fields}
    return runtime_for(Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqo-{uuid.uuid4().hex[:8]}"),
        tools=services.settings(**extra), monitors=MonitorSettings(**monitors)))


@pytest.fixture
def rt(redis_server, services, monkeypatch) -> Iterator[Runtime]:
    services.reset()
    monkeypatch.setattr(monitor_tools, "_start", lambda monitor: None)  # no beat here
    with installed(make_runtime(redis_server, services)) as runtime_:
        yield runtime_


@contextmanager
def in_call(device: str | None = None, session: str = "s-1"):
    set_current_call(ToolCall(turn_id="t-1", session_id=session, device=device,
                              call_id=f"c-{uuid.uuid4().hex[:6]}", name="tool"))
    try:
        yield
    finally:
        set_current_call(None)


# -- owners carry their kind -------------------------------------------------------------------
def test_a_session_named_like_a_device_is_not_that_device(rt):
    with in_call(device="kitchen"):
        assert owner() == "device:kitchen"
        memory.remember("the safe code is 1234")
        timers.set_timer("5 minutes", "tea")
    with in_call(device=None, session="kitchen"):
        assert owner() == "session:kitchen"
        assert memory.recall("safe code") == "I don't remember anything about safe code."
        assert timers.list_timers() == "You have no timers or reminders."
        timers.set_timer("1 second", "egg")
    assert rt.redis.hlen(rt.keys.memory("device:kitchen")) == 1
    assert not rt.redis.exists(rt.keys.memory("kitchen"))
    TimerStore(rt.redis, rt.keys).fire_due(now=time.time() + 2)
    # The session's timer is announced to the session, not on device kitchen.
    device_stream = rt.redis.xrange(rt.keys.announcements("kitchen"))
    session_stream = rt.redis.xrange(rt.keys.session_announcements("kitchen"))
    assert device_stream == []
    (event,) = [json.loads(f[b"e"]) for _id, f in session_stream]
    assert event["text"] == "Your egg timer is done." and event["device"] == "session:kitchen"
    with in_call(device="kitchen"):
        assert "tea timer" in timers.list_timers()


def test_doctor_groups_owner_keys_by_kind():
    assert family_of("vq:owner:device:kitchen:memory", "vq") == "vq:owner:device:*:memory"
    assert family_of("vq:owner:session:s-1:timers", "vq") == "vq:owner:session:*:timers"
    assert family_of("vq:turn:3f2a:untrusted", "vq") == "vq:turn:*:untrusted"


def test_data_kept_under_a_bare_name_is_adopted_by_that_device_only(rt):
    rt.redis.hset(rt.keys.memory("hall"), "f1", json.dumps({"fact": "the car is on level 3",
                                                             "ts": 1.0}))
    store = TimerStore(rt.redis, rt.keys)
    old = store.new("timer", "hall", "pasta", "Your pasta timer is done.", time.time() + 600)
    with in_call(device=None, session="hall"):  # a session never adopts it
        assert memory.recall("car") == "I don't remember anything about car."
        assert timers.list_timers() == "You have no timers or reminders."
    with in_call(device="hall"):
        assert memory.recall("car") == "You told me: the car is on level 3."
        assert "pasta timer" in timers.list_timers()
        assert timers.cancel_timer("pasta") == "Cancelled the pasta timer."
    assert rt.redis.hlen(rt.keys.memory("device:hall")) == 1
    assert not rt.redis.exists(rt.keys.memory("hall"))
    assert store.cancel(old) is False


# -- monitors belong to their owner ------------------------------------------------------------
def create(name: str) -> str:
    return monitor_tools.create_monitor(kind="queue_depth", target="tts", condition="> 5",
                                        every=60, name=name)


def test_a_monitor_is_seen_and_deleted_by_its_owner_only(rt):
    MonitorStore(rt.redis, rt.keys).save(Monitor.model_validate({**OPS, "origin": "settings"}))
    with in_call(device="kitchen"):
        assert "Monitor 'mine' created" in create("mine")
        stored = scoped_name("mine", "device:kitchen")  # in the owner's namespace
        assert rt.redis.hget(rt.keys.monitors(), stored) is not None
        assert MonitorStore(rt.redis, rt.keys).get(stored).owner == "device:kitchen"
        listed = monitor_tools.list_monitors()
        assert listed.startswith("2 monitors") and "mine:" in listed and "ops-backlog:" in listed
    for other in ({"device": "hall"}, {"device": None, "session": "kitchen"}):
        with in_call(**other):
            listed = monitor_tools.list_monitors()
            assert "mine" not in listed and "ops-backlog:" in listed
            with pytest.raises(ValueError, match="no monitor named 'mine'"):
                monitor_tools.monitor_status("mine")
            with pytest.raises(ValueError, match="no monitor named 'mine'"):
                monitor_tools.delete_monitor("mine")
            assert "Not checked yet" in monitor_tools.monitor_status("ops-backlog")
            with pytest.raises(PermissionError, match="configured by the operator"):
                monitor_tools.delete_monitor("ops-backlog")
    with in_call(device="kitchen"):
        assert "Not checked yet" in monitor_tools.monitor_status("mine")
        assert monitor_tools.delete_monitor("mine") == "Monitor 'mine' deleted."
    assert MonitorStore(rt.redis, rt.keys).get("ops-backlog") is not None


def test_creating_monitors_is_rate_limited_per_owner(redis_server, services, monkeypatch):
    limited = make_runtime(redis_server, services, creates_per_hour=2)
    monkeypatch.setattr(monitor_tools, "_start", lambda monitor: None)
    with use_runtime(limited):
        with in_call(device="kitchen"):
            create("one")
            create("two")
            with pytest.raises(PermissionError, match="at most 2 monitors"):
                create("three")
            assert MonitorStore(limited.redis, limited.keys).get("three") is None
        with in_call(device="hall"):
            create("three")  # another owner has its own budget
        # The window slides: an hour-old creation no longer counts.
        key = limited.keys.monitor_creates("device:kitchen")
        limited.redis.zadd(key, {m: time.time() - 3601
                                 for m in limited.redis.zrange(key, 0, 0)})
        with in_call(device="kitchen"):
            create("four")
    limited.redis.delete(*limited.redis.scan_iter(match=f"{limited.keys.prefix}:*"))


def test_only_the_settings_let_a_monitor_reach_private_addresses(redis_server, services):
    site = FlipServer()
    try:
        strict = make_runtime(redis_server, services, url_allowlist="")
        forged = Monitor(name="forged", kind="http", target=site.url, every=5, origin="settings")
        MonitorStore(strict.redis, strict.keys).save(forged)  # as anyone writing Redis could
        stored = MonitorStore(strict.redis, strict.keys).get("forged")
        assert stored is not None and stored.origin == "settings"
        assert not from_settings(stored, strict.settings)
        blocked = run_check(stored, strict)
        assert blocked.state == "error" and "refusing" in blocked.detail
        configured = runtime_for(strict.settings.replace(monitors={"configured": [
            {"name": "forged", "kind": "http", "target": site.url, "every": 5}]}))
        assert from_settings(stored, configured.settings)
        assert run_check(stored, configured).state == "ok"
        moved = stored.model_copy(update={"target": site.url + "?x=1"})
        assert not from_settings(moved, configured.settings)  # same name, another target
    finally:
        site.close()


# -- Home Assistant through its allow-lists ----------------------------------------------------
def test_home_assistant_refuses_what_is_not_allowed_before_any_request(rt, services):
    for domain, service, entity, data in (
        ("lock", "unlock", "lock.front_door", None),
        ("alarm_control_panel", "alarm_disarm", "alarm_control_panel.home", None),
        ("cover", "open_cover", "cover.garage", None),
        ("light", "turn_on", "lock.front_door", None),
        ("light", "turn_on", "light.kitchen, lock.front_door", None),
        ("light", "turn_on", "all", None),
        ("light", "turn_on", "", {"entity_id": "lock.front_door"}),
        ("light", "turn_on", "light.kitchen", {"area_id": "hall"}),
    ):
        with pytest.raises(PermissionError):
            home.home_assistant_call(domain, service, entity, data)
    with pytest.raises(PermissionError, match="not exposed"):
        home.home_assistant_state("lock.front_door")
    assert services.requests_to("/ha/") == []
    assert home.home_assistant_call("light", "turn_on", "light.kitchen").startswith("Done")
    assert home.home_assistant_state("sensor.outside_temperature").startswith("Outside")


def test_the_allow_lists_are_settings(redis_server, services):
    services.reset()
    wider = make_runtime(redis_server, services, ha_allowed_services="light.*,lock.unlock",
                         ha_exposed_entities="light.kitchen,lock.*")
    with use_runtime(wider):
        with pytest.raises(ValueError, match=r"no service lock\.unlock"):  # asked HA
            home.home_assistant_call("lock", "unlock", "lock.front_door")
        with pytest.raises(PermissionError, match="not exposed"):
            home.home_assistant_call("light", "turn_on", "light.hall")
    assert [r["path"] for r in services.requests_to("/ha/")] == ["/ha/api/services/lock/unlock"]


def test_monitor_names_tell_no_owner_about_another(rt):
    """Two devices may both have a monitor called 'site'; neither learns of the other's, nor
    how many the other has (#44)."""
    with in_call(device="kitchen"):
        assert "Monitor 'site' created" in create("site")
    with in_call(device="hall"):
        assert "Monitor 'site' created" in create("site")  # not "exists already"
        assert monitor_tools.list_monitors().startswith("1 monitor: site:")
        assert monitor_tools.delete_monitor("site") == "Monitor 'site' deleted."
    with in_call(device="kitchen"):
        assert "Not checked yet" in monitor_tools.monitor_status("site")
        assert monitor_tools.delete_monitor("site") == "Monitor 'site' deleted."

