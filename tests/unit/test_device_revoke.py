"""Revoking a device forgets what it left: a name added again starts clean (#44)."""

from __future__ import annotations

import json
import time

import redis
from typer.testing import CliRunner

from voxqueue.cli import app
from voxqueue.gateway.devices import DeviceRegistry
from voxqueue.keys import Keys
from voxqueue.sessions import Sessions
from voxqueue.settings import RedisSettings, Settings, get_settings
from workers.monitor.monitors import Monitor, MonitorStore
from workers.tool_registry.timer_store import TimerStore

DB = 11


def seed(r: redis.Redis, keys: Keys, settings: Settings, name: str) -> None:
    """What a device leaves after a while: a timer, a monitor, a memory, a session with a
    history and an action waiting for a yes, an announcement."""
    TimerStore(r, keys).new("timer", f"device:{name}", "tea", "Your tea is done.",
                            time.time() + 3600, 3600)
    MonitorStore(r, keys).save(Monitor(name=f"{name}-site", kind="queue_depth", target="stt",
                                   every=60, device=name))
    r.hset(keys.memory(f"device:{name}"), "safe code", "9931")
    session = f"dev:{name}:default"
    r.rpush(keys.messages(session), json.dumps({"role": "user", "content": "hi"}))
    r.zadd(keys.sessions(), {session: time.time()})
    r.set(keys.pending_action(session), "{}")
    r.rpush(keys.announcements(name), "{}")


def test_revoke_forgets_what_the_device_left_and_keep_data_keeps_it(redis_server, monkeypatch,
                                                                   request):
    url = redis_server.url[:-1] + str(DB)
    r = redis.Redis.from_url(url)
    r.flushdb()
    monkeypatch.setenv("VOXQUEUE_REDIS_URL", url)
    get_settings.cache_clear()  # the command reads the process's settings
    request.addfinalizer(get_settings.cache_clear)
    settings = Settings(redis=RedisSettings(url=url))
    keys = Keys(settings.redis.key_prefix)
    registry = DeviceRegistry(r, keys)
    for name in ("kitchen", "hall"):
        registry.add(name)
        seed(r, keys, settings, name)

    runner = CliRunner()
    result = runner.invoke(app, ["devices", "revoke", "kitchen"])
    assert result.exit_code == 0, result.output
    assert "forgot 1 timers, 1 monitors, 1 sessions" in result.output

    assert TimerStore(r, keys).pending("device:kitchen") == []
    assert [m.name for m in MonitorStore(r, keys).all()] == ["hall-site"]
    assert not r.exists(keys.memory("device:kitchen"), keys.messages("dev:kitchen:default"),
                        keys.pending_action("dev:kitchen:default"), keys.announcements("kitchen"))
    assert [s.session_id for s in Sessions(r, keys, settings).all()] == ["dev:hall:default"]
    # The other device keeps everything.
    assert len(TimerStore(r, keys).pending("device:hall")) == 1
    assert r.hget(keys.memory("device:hall"), "safe code") == b"9931"
    # A name added again starts clean: no memory, no history to inherit.
    registry.add("kitchen")
    assert not r.exists(keys.memory("device:kitchen"), keys.messages("dev:kitchen:default"))

    result = runner.invoke(app, ["devices", "revoke", "hall", "--keep-data"])
    assert result.exit_code == 0, result.output
    assert r.hget(keys.memory("device:hall"), "safe code") == b"9931"
    assert len(TimerStore(r, keys).pending("device:hall")) == 1
