"""A worker layout with no ``monitor`` worker (``--queues stt,agent`` and ``--queues tools,tts``)
still fires timers and ends overdue turns: every worker process runs the housekeeping loop, one
at a time. Crash points armed by accident are shouted about by the worker and by the doctor."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT, RedisServer, System, system_env
from tests.reliability.ledger import audit_entries
from voxqueue.broker.sweeps import sweep_turn_holder
from voxqueue.contracts import TurnSpec

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
#: Armed by a "stray .env" on one worker: a point of a queue it never runs, so it never fires.
STRAY_CRASH_AT = "stt.after-send"


@pytest.fixture(scope="module")
def no_monitor(fake_providers: object,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    server = RedisServer()
    server.start()
    system = System(system_env(server.url, fake_providers), tmp_path_factory.mktemp("layout"),
                    beat=False)
    sup = system.sup
    sup.start("worker-stt-agent", sup.worker_argv(["stt", "agent"], name="stt-agent"))
    sup.start("worker-tools-tts", sup.worker_argv(["tools", "tts"], name="tools-tts"),
              {"VOXQUEUE_CRASH_AT": STRAY_CRASH_AT})
    try:
        sup.wait_for_workers(["stt", "agent", "tools", "tts"], timeout=90)
        yield system
    finally:
        system.stop()
        server.stop()


def wait_until(check: object, timeout: float) -> bool:
    give_up = time.time() + timeout
    while time.time() < give_up:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_a_timer_fires_and_an_overdue_turn_ends_without_a_monitor_worker(no_monitor, fake):
    client = no_monitor.client()
    assert wait_until(lambda: sweep_turn_holder(
        client.redis, client.keys.housekeeping_turn()), 15), "no worker took the turn"
    fake.script_chat(
        {"match": "timer", "tool_calls": [
            {"name": "set_timer", "arguments": {"duration": "1 second", "label": "tea"}}]},
        {"after_tool": True, "content": "Timer set."},
    )
    turn = client.ask("set a tea timer", session=f"layout-{uuid.uuid4().hex[:6]}",
                      device="pantry", speak=False)
    assert turn.wait(timeout=30).status == "ok"
    announce = client.keys.announcements("pantry")
    assert wait_until(lambda: client.redis.xlen(announce) >= 1, 15), "the timer never fired"
    # A turn whose job was lost (none was ever sent): only housekeeping can end it.
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="layout-lost", input="text",
                    text="hello?", created_at=now, deadline=now + 1.0, speak=False)
    client.store.create(spec)
    assert wait_until(lambda: client.store.ended(spec.turn_id), 15), "never ended"
    found = audit_entries(spec.turn_id, spec.deadline, list(client.store.history(spec.turn_id)))
    assert found.status == "timeout" and found.error_code == "timeout", found
    assert not found.lost and found.duplicates == 0, found


def test_armed_crash_points_are_shouted_by_the_worker_and_the_doctor(no_monitor):
    logs = no_monitor.logs()
    assert "CRASH POINTS ARMED" in logs and STRAY_CRASH_AT in logs, logs[-3000:]
    env = {**no_monitor.env, "VOXQUEUE_CRASH_AT": STRAY_CRASH_AT, "COLUMNS": "300"}
    done = subprocess.run([*VOXQUEUE, "doctor"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=90)

    def row(name: str) -> str:
        return next((line for line in done.stdout.splitlines() if line.strip().startswith(name)),
                    "")

    assert "warn" in row("crash points") and STRAY_CRASH_AT in row("crash points"), done.stdout
    assert " ok " in row("housekeeping") and "timers fire" in row("housekeeping"), done.stdout
    assert "appendfsync always" in row("redis fsync"), done.stdout
    assert no_monitor.env["VOXQUEUE_DATA_DIR"] in row("data folder"), done.stdout
    calm = subprocess.run([*VOXQUEUE, "doctor"], env={**no_monitor.env, "COLUMNS": "300"},
                          cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert "disarmed" in calm.stdout, calm.stdout
