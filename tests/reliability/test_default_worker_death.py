"""``voxqueue worker`` as it starts by default: every queue in one threads-pool process (a
channel on several queues takes with kombu's ``BRPOP``, not our ``BLMOVE``), and that process
alone, so it also holds the sweeper's turn (``voxqueue/broker/sweeps.py``). SIGKILLed mid-task
and started again (as ``voxqueue up`` or Kubernetes would), the new process takes the dead one's
sweeper's turn over and the task runs again once its lease is out: the turn ends ok, once."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import RedisServer, System, system_env
from tests.reliability.ledger import audit
from voxqueue.settings import QUEUES
from voxqueue.up.restarts import RestartPolicy

pytestmark = pytest.mark.integration
SWEEP_TURN = "_voxqueue.sweep.unacked"


@pytest.fixture
def system(fake_providers, tmp_path):
    server = RedisServer()
    server.start()
    system = System(system_env(server.url, fake_providers), tmp_path)
    system.sup.restart = RestartPolicy(first_s=0.1, max_s=0.5)
    system.sup.log = lambda line: None
    # The defaults of `voxqueue worker`: every queue, the threads pool, 8 threads.
    system.sup.start("worker-all", system.sup.worker_argv(QUEUES, name="all", concurrency=8))
    system.sup.wait_for_workers(QUEUES)
    watcher = threading.Thread(target=system.sup.watch, args=(0.1,), daemon=True)
    watcher.start()
    yield system
    system.sup.stopping = True
    watcher.join(2)
    system.stop()
    server.stop()


def test_the_default_worker_killed_mid_task_takes_its_sweeper_turn_back(system,
                                                                        fake_providers,
                                                                        reliability_case):
    fake_providers.reset()
    fake_providers.inject("chat", delay=3.0)
    fake_providers.script_chat({"match": "default worker", "repeat": True,
                                "content": "Still here."})
    client = system.client()
    give_up = time.time() + 10
    while (holder := client.redis.get(SWEEP_TURN)) is None:
        assert time.time() < give_up, "the worker never took the sweeper's turn"
        time.sleep(0.1)
    worker = next(p for p in system.sup.procs if p.name == "worker-all")
    pid = int(holder.decode().rsplit("-", 2)[1])
    assert pid == worker.popen.pid, Path(f"/proc/{pid}/cmdline").read_bytes()

    turn = client.ask("default worker question", session="default-worker-kill")
    give_up = time.time() + 20
    while not any(e.event.type == "llm-start" for e in client.store.history(turn.turn_id)):
        assert time.time() < give_up, "the agent step never started"
        time.sleep(0.02)
    os.kill(worker.popen.pid, signal.SIGKILL)
    killed = time.time()
    result = turn.wait(timeout=60)

    case = reliability_case("the default `voxqueue worker` (every queue, one process, the "
                            "sweeper) SIGKILLed mid-LLM call")
    case.turns += 1
    found = audit(client.store, turn)
    case.count(found)
    case.note(f"ended {found.status} {found.ended_at - killed:.1f} s after the kill")
    assert result.status == "ok", result.error
    assert found.run_ends == 1 and found.duplicates == 0, found
    assert [e.event.type for e in turn._entries].count("reply") == 1
    now_holder = client.redis.get(SWEEP_TURN)
    assert now_holder is not None and now_holder != holder, "the new process sweeps now"
