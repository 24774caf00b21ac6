"""``voxqueue up`` keeps its data: its embedded Redis stores it in ``VOXQUEUE_DATA_DIR``, so a
session, a device token, a memory and a pending timer are all there after Ctrl-C and a new
``up``; a second ``up`` on the same folder is refused with a clear error."""

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

from tests.conftest import ROOT, free_port, system_env
from voxqueue.client.direct import Client
from voxqueue.gateway.devices import DeviceRegistry
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.up.embedded_redis import redis_answers
from voxqueue.up.supervisor import Supervisor

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]


class Ups:
    """Starts ``voxqueue up`` (embedded Redis on a port of its own) as a user does."""

    def __init__(self, env: dict[str, str], port: int, work: Path) -> None:
        self.env, self.port, self.work = env, port, work
        self.url = f"redis://127.0.0.1:{port}/0"
        self.settings = Settings(redis=RedisSettings(url=self.url))
        self.running: list[subprocess.Popen[str]] = []

    def start(self, port: int | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [*VOXQUEUE, "up", "--no-flower", "--no-beat", "--processes", "agent=1,tts=1",
             "--redis-port", str(port or self.port)],
            env={**self.env, "COLUMNS": "300"}, cwd=self.work, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.running.append(proc)
        return proc

    def ready(self) -> None:
        give_up = time.monotonic() + 60
        while not redis_answers(self.url):
            assert time.monotonic() < give_up and self.running[-1].poll() is None, \
                "the embedded Redis never answered"
            time.sleep(0.1)
        Supervisor(self.settings).wait_for_workers(QUEUES, timeout=90)

    def ctrl_c(self, proc: subprocess.Popen[str]) -> str:
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, output
        return output

    def stop_all(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)


@pytest.fixture
def ups(fake_providers: object, tmp_path: Path) -> Iterator[Ups]:
    env = system_env(f"redis://127.0.0.1:{free_port()}/0", fake_providers,  # nothing answers
                     VOXQUEUE_DATA_DIR=str(tmp_path / "data"),
                     VOXQUEUE_METRICS_PORT=str(free_port()))
    found = Ups(env, free_port(), tmp_path)
    try:
        yield found
    finally:
        found.stop_all()


def test_up_keeps_sessions_devices_memories_and_timers_across_a_restart(ups, fake):
    first = ups.start()
    ups.ready()
    fake.script_chat(
        {"match": "keep these", "tool_calls": [
            {"name": "remember", "arguments": {"fact": "my car is on level 3"}},
            {"name": "set_timer", "arguments": {"duration": "2 hours", "label": "bread"}}]},
        {"after_tool": True, "content": "Remembered, and the timer is set."},
    )
    with Client(ups.settings) as client:
        result = client.ask("keep these for me", session="kept", device="pantry",
                            speak=False).wait(timeout=60)
        assert result.status == "ok", result.error
        assert all(call.error is None for call in result.tool_calls), result.tool_calls
    added = subprocess.run([*VOXQUEUE, "devices", "add", "hallway"],
                           env={**ups.env, "VOXQUEUE_REDIS_URL": ups.url}, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    # A second up on the same data folder is refused (another port: the lock, not the port).
    second = ups.start(port=free_port())
    refused, _ = second.communicate(timeout=60)
    assert second.returncode == 2 and "in use by another voxqueue up" in refused, refused
    output = ups.ctrl_c(first)
    assert f"Its data: {ups.env['VOXQUEUE_DATA_DIR']}" in output, output
    assert "appendfsync always" in output

    ups.start()  # the same folder, a new embedded Redis
    ups.ready()
    with Client(ups.settings) as client:
        r, keys = client.redis, client.keys
        history = [json.loads(m) for m in r.lrange(keys.messages("kept"), 0, -1)]
        assert [m["role"] for m in history][:2] == ["system", "user"], history
        assert "level 3" in json.dumps([json.loads(v) for v in
                                        r.hvals(keys.memory("device:pantry"))])
        assert r.zcard(keys.timers_due()) == 1, "the pending timer"
        assert DeviceRegistry(r, keys).authenticate(token) == "hallway"
        fake.reset()
        fake.script_chat({"match": "still there", "content": "Yes, I remember."})
        again = client.ask("are you still there", session="kept", speak=False).wait(timeout=60)
        assert again.status == "ok", again.error
    asked = json.dumps(fake.requests[-1])
    assert "keep these for me" in asked, "the next turn sees the session's history"
