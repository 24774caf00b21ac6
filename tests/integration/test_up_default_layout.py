"""``voxqueue up`` with its defaults: one worker process for every queue, beat and the exporter on
threads of ``up`` itself. A turn is answered, one beat holds the lock, ``voxqueue doctor`` shows
the memory of each process, and Ctrl-C releases the lock and forgets the processes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import ROOT, RedisServer, free_port, system_env
from tests.integration.test_up_supervision import wait_for
from voxqueue.client.direct import Client
from voxqueue.keys import Keys
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.up.process_table import SHARED_WORKER
from voxqueue.up.running import RUNNING_FILE, SUPERVISOR
from voxqueue.up.supervisor import Supervisor

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]


@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    settings: Settings
    log: Path

    def running_file(self) -> Path:
        return Path(self.env["VOXQUEUE_DATA_DIR"]) / RUNNING_FILE

    def beat_lock(self) -> bool:
        lock = Keys(self.settings.redis.key_prefix).redbeat_prefix() + ":lock"
        return bool(redis.Redis.from_url(self.settings.redis.url).exists(lock))


@pytest.fixture(scope="module")
def up(fake_providers: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    server = RedisServer()
    server.start()
    metrics_port = free_port()
    env = system_env(server.url, fake_providers, VOXQUEUE_METRICS_PORT=str(metrics_port),
                     VOXQUEUE_MONITOR_MIN_EVERY_S="1", VOXQUEUE_MONITORS=json.dumps([
                         {"name": "tts-backlog", "kind": "queue_depth", "target": "tts",
                          "condition": "> 1000", "every": 1}]))
    log = tmp_path_factory.mktemp("up") / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*VOXQUEUE, "up", "--no-flower"], env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    settings = Settings(redis=RedisSettings(url=server.url))
    try:
        Supervisor(settings).wait_for_workers(QUEUES, timeout=90, names=[SHARED_WORKER])
        yield Up(proc, env, settings, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        server.stop()


def test_one_process_answers_a_turn_and_beat_runs_in_up(up, fake):
    fake.script_chat({"match": "add", "content": "That is 25."})
    with Client(up.settings) as client:
        result = client.ask("add twelve and thirteen", session="up-default").wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.timings.get("tts", 0) > 0  # the TTS queue's task ran too, in that process
    wait_for(up.beat_lock, 30, "beat (a thread of up) to take its lock")
    port = up.env["VOXQUEUE_METRICS_PORT"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        assert b"voxqueue_queue_depth" in answer.read()  # the exporter, a thread of up


def test_the_settings_monitors_run_from_beat_on_its_thread(up):
    """Beat on ``up``'s light app syncs the settings' monitors when it starts (the hook lives
    with the monitors, not in the workers' app), and the one worker process checks them."""
    r = redis.Redis.from_url(up.settings.redis.url)
    key = Keys(up.settings.redis.key_prefix).monitor_state("tts-backlog")  # an operator's
    wait_for(lambda: int(r.hget(key, "checks") or 0) >= 2, 60,
             "the settings' monitor to be checked twice")
    assert r.hget(key, "state") == b"ok"


def test_doctor_shows_the_memory_of_each_process(up):
    done = subprocess.run([*VOXQUEUE, "doctor"], env={**up.env, "COLUMNS": "200"}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    output = done.stdout
    assert "one beat holds the scheduler lock" in output, output
    rows = {name: (int(pid), float(rss)) for name, pid, rss in re.findall(
        rf"^\s*({re.escape(SUPERVISOR)}|worker-\S+)\s+(\d+)\s+([\d.]+) MiB", output,
        re.MULTILINE)}
    assert set(rows) == {SUPERVISOR, f"worker-{SHARED_WORKER}"}, output
    assert rows[SUPERVISOR][0] == up.proc.pid
    assert all(rss > 10 for _pid, rss in rows.values()), rows  # an interpreter at least
    total = re.search(r"^\s*all 2\s+([\d.]+) MiB", output, re.MULTILINE)
    assert total is not None, output
    assert float(total[1]) == pytest.approx(sum(rss for _pid, rss in rows.values()), abs=0.2)


def test_ctrl_c_releases_beats_lock_and_forgets_the_processes(up):
    assert up.running_file().exists() and up.beat_lock()
    up.proc.send_signal(signal.SIGINT)
    up.proc.wait(60)
    assert not up.running_file().exists()
    assert not up.beat_lock(), "the next beat would wait for the lock to expire"
