"""Items on a queue that are not messages (``redis-cli LPUSH stt garbage``, JSON that is no
kombu envelope) go to the dead letters in the step that takes them off the taker's in-flight
list; the worker goes on, and ``voxqueue doctor`` shows them. Here on ``voxqueue worker``'s
default layout: every queue in one threads-pool process (the take from several lists)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import RedisServer, System, system_env
from voxqueue.broker.dead_letters import DEAD_LETTER
from voxqueue.contracts.dead_letter import DeadLetter
from voxqueue.settings import QUEUES

pytestmark = pytest.mark.integration

#: What is pushed on each queue: garbage, and on stt, JSON that is not a message envelope.
POISON = [(q, f"garbage on {q}".encode()) for q in QUEUES] + [
    ("stt", json.dumps({"task": "voxqueue.stt.transcribe", "not": "an envelope"}).encode()),
    ("agent", b"[1, 2, 3]"),
]


@pytest.fixture
def system(fake_providers, tmp_path):
    server = RedisServer()
    server.start()
    system = System(system_env(server.url, fake_providers), tmp_path)
    system.sup.log = lambda line: None
    system.sup.start("worker-all", system.sup.worker_argv(QUEUES, name="all", concurrency=8))
    system.sup.wait_for_workers(QUEUES)
    yield system
    system.stop()
    server.stop()


def test_items_that_are_not_messages_are_dead_lettered_and_the_worker_goes_on(
        system, fake_providers, reliability_case):
    fake_providers.reset()
    fake_providers.script_chat({"match": "after the poison", "content": "Still fine."})
    client = system.client()
    worker = next(p for p in system.sup.procs if p.name == "worker-all")
    for queue, item in POISON:
        client.redis.lpush(queue, item)
    give_up = time.time() + 15
    while client.redis.llen(DEAD_LETTER) < len(POISON):
        assert worker.popen.poll() is None, "the worker exited"
        assert time.time() < give_up, client.redis.lrange(DEAD_LETTER, 0, -1)
        time.sleep(0.1)
    found = [DeadLetter.model_validate_json(e) for e in client.redis.lrange(DEAD_LETTER, 0, -1)]
    assert sorted((d.queue, (d.item or "").encode()) for d in found) == sorted(POISON)
    assert {d.reason for d in found} == {"not JSON", "JSON list, not a message envelope",
                                         "not a message kombu can deliver (KeyError: "
                                         "'properties')"}
    assert all(client.redis.llen(q) == 0 for q in QUEUES)

    turn = client.ask("a question after the poison", session="after-poison")
    result = turn.wait(timeout=60)
    case = reliability_case("items that are not messages on every queue (default worker)")
    case.turns += 1
    case.note(f"{len(found)} items dead-lettered; the worker stayed up")
    assert result.status == "ok", result.error
    assert result.reply == "Still fine."
    assert worker.popen.poll() is None, "the worker is the same process, still up"
    logs = (system.sup.log_dir / "worker-all.log").read_text()
    assert "an item moved to the dead letters" in logs and "garbage on tts" in logs

    doctor = subprocess.run(
        [sys.executable, "-c", "from voxqueue.cli import main; main()", "doctor"],
        env={**system.env, "COLUMNS": "300"}, capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in doctor.stdout.splitlines()]
    summary = [line for line in lines if line.startswith("dead letters ")]
    assert summary and f"{len(POISON)} queue item(s)" in summary[0], doctor.stdout
    shown = [line for line in lines if line.startswith("dead letter: ")]
    assert len(shown) == 5, doctor.stdout
    assert any("dead letter: agent" in s and "JSON list" in s and "[1, 2, 3]" in s
               for s in shown), doctor.stdout
    assert any("dead letter: monitor" in s and "garbage on monitor" in s
               for s in shown), doctor.stdout
