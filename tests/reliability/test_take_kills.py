"""A worker killed right after it took a message, before kombu recorded the delivery (the crash
point ``broker.after-take``, voxqueue/broker/take.py), loses nothing: the message is in the
dead process's in-flight list, and the sweeper puts it back once that list's lease is out.

Run on the layouts that take from several lists at once: ``voxqueue worker`` with its default
queues (every queue, one threads-pool process, as ``Supervisor.worker_argv`` starts it) and a
plain ``celery -A workers worker`` (no ``-Q``, Celery's default pool). Kombu's ``BRPOP``, which
these layouts used before, lost the message at this instant (2 of 216 turns measured). The
supervisor starts a killed worker again at once, as ``voxqueue up`` or Kubernetes would.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import SPEECH, RedisServer, System, system_env
from tests.reliability.ledger import audit
from voxqueue.broker.take import AFTER_TAKE, CRASH_COUNTDOWN, CRASH_FIRED
from voxqueue.settings import QUEUES
from voxqueue.up.restarts import RestartPolicy

pytestmark = pytest.mark.integration
#: How many turns (one kill each) the default layout's test runs, cycling through ``PLANS``
#: (CI's time budget: each kill costs a worker's start, several seconds);
#: VOXQUEUE_TEST_TAKE_KILLS=12 runs every plan three times.
KILLS = int(os.environ.get("VOXQUEUE_TEST_TAKE_KILLS", "2"))
#: How a turn starts, the event after which the next take is killed (None: before the turn
#: starts), and the queue of that take.
PLANS: list[tuple[str, str | None, str]] = [
    ("say", None, "stt"),              # the transcription's take
    ("tools", "llm-start", "tools"),   # the tool call's
    ("ask", "llm-start", "tts"),       # a sentence's, the agent's step running in it too
    ("ask", None, "agent"),            # the agent step's
]


@contextmanager
def killable(fake_providers, log_dir, argv: Callable[[System], list[str]]) -> Iterator[System]:
    """One worker process armed at ``broker.after-take``, started again whenever it dies."""
    server = RedisServer()
    server.start()
    env = system_env(server.url, fake_providers, VOXQUEUE_CRASH_AT=AFTER_TAKE)
    system = System(env, log_dir)
    system.sup.restart = RestartPolicy(first_s=0.1, max_s=0.5)
    system.sup.log = lambda line: None
    system.sup.start("worker-all", argv(system))
    watcher = threading.Thread(target=system.sup.watch, args=(0.1,), daemon=True)
    try:
        system.sup.wait_for_workers(QUEUES)
        watcher.start()
        yield system
    finally:
        system.sup.stopping = True
        watcher.join(2)
        system.stop()
        server.stop()


def arm(system: System) -> None:
    """The worker's next take kills it."""
    system.client().redis.set(CRASH_COUNTDOWN, 1)


def wait_for(system: System, turn_id: str, kind: str, timeout: float = 20) -> None:
    store = system.client().store
    give_up = time.time() + timeout
    while not any(e.event.type == kind for e in store.history(turn_id)):
        assert time.time() < give_up, f"no {kind} event in turn {turn_id}"
        time.sleep(0.02)


def fired(system: System) -> list[dict]:
    return [json.loads(x) for x in system.client().redis.lrange(CRASH_FIRED, 0, -1)]


def run_turns(system: System, fake, plans: list[tuple[str, str | None, str]], case) -> None:
    """One turn per plan (see ``PLANS``), one kill each; each turn must end ok, once."""
    client = system.client()
    for n, (start, after, queue) in enumerate(plans):
        if after is None:
            arm(system)
        else:  # the model answers a second after it is asked: armed before the next take
            fake.inject("chat", delay=1.0)
        if start == "say":
            fake.script_transcripts("what time is it")
            turn = client.say(SPEECH / "command_time.wav", session=f"take-kill-{n}")
        elif start == "tools":
            fake.script_chat(  # (the answer after the tool first: both repeat)
                {"after_tool": True, "match": f"add for turn {n}", "repeat": True,
                 "content": f"It is {n + 1}."},
                {"match": f"add for turn {n}", "repeat": True,
                 "tool_calls": [{"name": "add_numbers", "arguments": {"a": n, "b": 1}}]})
            turn = client.ask(f"add for turn {n}", session=f"take-kill-{n}", speak=False)
        else:
            fake.script_chat({"match": f"question {n}", "repeat": True,
                              "content": f"Answer {n}. Second part."})
            turn = client.ask(f"question {n}", session=f"take-kill-{n}")
        if after is not None:
            wait_for(system, turn.turn_id, after)
            arm(system)
        result = turn.wait(timeout=60)
        found = audit(client.store, turn)
        case.turns += 1
        case.count(found)
        kills = fired(system)
        assert len(kills) == n + 1 and kills[-1]["list"] == queue, kills
        assert result.status == "ok", (n, start, result.error)
        assert found.run_ends == 1 and found.duplicates == 0, found
    case.note(f"{len(plans)} turns, {len(fired(system))} kills at {AFTER_TAKE}, each a "
              f"{'/'.join(q for *_, q in plans)} take")


def test_the_default_worker_killed_between_take_and_record_loses_no_turn(
        fake_providers, tmp_path, reliability_case):
    fake = fake_providers
    fake.reset()
    with killable(fake, tmp_path, lambda s: s.sup.worker_argv(QUEUES, name="all",
                                                              concurrency=8)) as system:
        case = reliability_case(f"`voxqueue worker` default layout SIGKILLed at {AFTER_TAKE}")
        run_turns(system, fake, [PLANS[n % len(PLANS)] for n in range(KILLS)], case)


def test_a_plain_celery_worker_killed_between_take_and_record_loses_no_turn(
        fake_providers, tmp_path, reliability_case):
    fake = fake_providers
    fake.reset()
    plain = [sys.executable, "-m", "celery", "-A", "workers", "worker", "-l", "INFO"]
    with killable(fake, tmp_path, lambda s: plain) as system:
        case = reliability_case(f"plain `celery -A workers worker` SIGKILLed at {AFTER_TAKE}")
        run_turns(system, fake, [PLANS[-1]], case)
