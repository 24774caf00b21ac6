"""The crash matrix: SIGKILL a worker at every crash point of every stage, in the threads and the
prefork pool, with a second worker on each queue, and check every turn with a ledger that does
not trust the code under test:

- exactly one ``run-end``, status ok, before the deadline, nothing written after it;
- a session history OpenAI accepts (every tool call answered once, in order);
- the side-effecting tool ran exactly once;
- every sentence of the reply heard exactly once, in order, with its own words (the fake voice
  makes the same audio for the same text, so the heard bytes must equal the sentences' audio);
- the client's wait returned (it never waits forever).

Workers are started as ``voxqueue worker`` starts them (``Supervisor.worker_argv``), with the
settings users run, and ``VOXQUEUE_CRASH_AT=plan``: each turn's session names its point. A
representative subset always runs; ``--crash`` runs the whole matrix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import threading
import time
import uuid

import pytest

from testkit.fakes.provider_server import spoken_pcm
from tests.conftest import SPEECH, RedisServer, System, system_env
from tests.reliability.ledger import audit_entries, heard_problems, history_problems
from voxqueue.contracts import TurnEvent
from voxqueue.turns import StreamEntry
from workers.runtime.crash import POINTS

pytestmark = pytest.mark.integration

POOLS = {"threads": 4, "prefork": 2}  # pool -> concurrency of each worker
STAGES = ("stt", "agent", "tools", "tts")
#: Always run (CI's time budget): the join in the threads pool (the default of everything we
#: ship) and one point in prefork. A kill in every other stage is in every run too, at named
#: points (tests/reliability/test_worker_death.py, both pools) and at random instants (the
#: chaos test, both layouts); every point of this matrix runs with ``--crash``.
SUBSET = {("threads", "tools.after-record"), ("prefork", "tts.after-done")}
REPLY = ("The first sentence of the answer is here. A second sentence follows right after "
         "it. And a third one ends the reply.")
QUESTION = "crash matrix question"
#: Seconds from the kill to the turn's end, per pool and queue (printed at the end).
TAKEOVER: dict[tuple[str, str], list[float]] = {}


def cases():
    for pool in POOLS:
        for stage in STAGES:
            for point in POINTS[stage]:
                marks = [] if (pool, point) in SUBSET else [pytest.mark.crash]
                yield pytest.param(pool, point, marks=marks, id=f"{pool}-{point}")


def start_system(pool: str, redis_url: str, fake, log_dir) -> System:
    env = system_env(redis_url, fake, VOXQUEUE_CRASH_AT="plan",
                     VOXQUEUE_MAX_DELIVERIES="4")
    system = System(env, log_dir)
    for queue in STAGES:
        for name in (f"{queue}-a", f"{queue}-b"):
            system.sup.start(f"worker-{name}", system.sup.worker_argv(
                [queue], name=name, pool=pool, concurrency=POOLS[pool]))
    system.sup.start("worker-monitor", system.sup.worker_argv(["monitor"], name="monitor"))
    system.sup.start("beat", system.sup.beat_argv())
    system.sup.wait_for_workers((*STAGES, "monitor"))
    return system


@pytest.fixture(scope="module")
def systems(fake_providers, tmp_path_factory):
    """One system per pool, each on a Redis server of its own, started on first use."""
    made: dict[str, tuple[System, RedisServer]] = {}

    def get(pool: str) -> System:
        if pool not in made:
            server = RedisServer()
            server.start()
            made[pool] = (start_system(pool, server.url, fake_providers,
                                       tmp_path_factory.mktemp(f"crash-{pool}")), server)
        system = made[pool][0]
        system.restart_dead()
        return system

    yield get
    for system, server in made.values():
        system.stop()
        server.stop()
    print_takeover()


def print_takeover() -> None:
    for (pool, queue), seconds in sorted(TAKEOVER.items()):
        print(f"\ncrash takeover {pool}/{queue}: kill -> turn end p50 "
              f"{statistics.median(seconds):.1f} s, max {max(seconds):.1f} s ({len(seconds)})")


def diagnosis(client, entries) -> str:
    """What a failed case's turn did, and what Redis still holds for the queues."""
    events = [(e.event.type, e.event.data.get("seq"), e.event.data.get("attempt"))
              for e in entries if e.event.type != "tts-chunk"]
    r = client.redis
    queues = {q: r.llen(q) for q in STAGES}
    unacked = [json.loads(v)[0]["headers"]["id"] for v in r.hvals("unacked")]
    return f"events {events}; queued {queues}; unacked {unacked}"


def expected_pcm(text: str) -> bytes:
    return spoken_pcm(text)  # the fake ElevenLabs voice


@pytest.mark.parametrize(("pool", "point"), list(cases()))
def test_crash_point(systems, fake_providers, reliability_case, pool, point):
    case = reliability_case(f"crash at {point} ({pool} pool, a second worker on the queue)")
    took = crashed_turn(systems(pool), fake_providers, case, pool, point)
    TAKEOVER.setdefault((pool, point.split(".")[0]), []).append(took)


def test_the_sweeper_dying_with_a_task_is_replaced_in_time(systems, fake_providers,
                                                             reliability_case):
    """The process holding the sweeper's turn (voxqueue/broker/sweeps.py) is killed as the task
    of another dies: another process takes the turn over before the dead task's lease runs out,
    so the turn ends ok and about as soon as after any kill (not at its deadline)."""
    system = systems("threads")
    r = system.client().redis
    give_up = time.time() + 10
    while (holder := r.get(SWEEP_TURN)) is None:
        assert time.time() < give_up, "no process holds the sweeper's turn"
        time.sleep(0.1)
    sweeper = int(holder.decode().rsplit("-", 2)[1])  # "<host>-<pid>-<id>"
    case = reliability_case("crash at tts.mid-stream, the sweeper killed with it (threads)")
    took = crashed_turn(system, fake_providers, case, "threads", "tts.mid-stream",
                        also_kill=sweeper)
    assert r.get(SWEEP_TURN) not in (None, holder), "another process holds the turn now"
    assert took < LEASE_S + 6, f"the turn ended {took:.1f} s after the kills"


SWEEP_TURN = "_voxqueue.sweep.unacked"
LEASE_S = 6.0  # the default visibility timeout these workers run with


def crashed_turn(system: System, fake, case, pool: str, point: str,
                 also_kill: int | None = None) -> float:
    """One turn whose worker is killed at ``point`` (and ``also_kill`` SIGKILLed as it dies),
    checked by the ledger; returns the seconds from the kill to the turn's end."""
    client = system.client()
    keys = client.keys
    fake.reset()
    label = f"crash-{uuid.uuid4().hex[:8]}"
    fake.script_transcripts({"text": QUESTION, "repeat": True})
    fake.script_chat(
        {"after_tool": True, "content": REPLY, "repeat": True},
        {"match": QUESTION, "repeat": True, "tool_calls": [
            {"name": "record_side_effect", "arguments": {"label": label}},
            {"name": "add_numbers", "arguments": {"a": 2, "b": 3}}]},
    )
    session = f"crash-{pool}-{point}-{label}"
    client.redis.set(keys.crash_plan(session), point, ex=600)
    case.turns += 1

    turn = client.say(SPEECH / "command_time.wav", session=session)
    if also_kill is not None:
        threading.Thread(target=kill_when_fired, daemon=True,
                         args=(client.redis, keys.crash_fired(turn.turn_id), also_kill)).start()
    started = time.time()
    played = b"".join(turn.playback(timeout=120))
    waited = time.time() - started
    entries = list(client.store.history(turn.turn_id))
    found = audit_entries(turn.turn_id, turn.spec.deadline, entries)
    case.count(found)

    fired = client.redis.get(keys.crash_fired(turn.turn_id))
    assert fired is not None, f"the crash point {point} was never reached: {system.logs()}"
    kill = json.loads(fired)
    assert found.run_ends == 1 and not found.lost, found
    assert found.status == "ok", diagnosis(client, entries)
    assert found.duplicates == 0 and found.after_end == 0, found
    assert waited < turn.spec.deadline - turn.spec.created_at + 10, "the client waited on"
    history = [json.loads(m) for m in client.redis.lrange(keys.messages(session), 0, -1)]
    assert [m["role"] for m in history][:2] == ["system", "user"], history
    assert sum(m["role"] == "user" for m in history) == 1, history
    assert history_problems(history) == []
    assert history[-1] == {"role": "assistant", "content": REPLY}
    assert int(client.redis.get(f"probe:side-effect:{label}") or 0) == 1
    assert heard_problems(entries, played, expected_pcm) == []

    took: float = found.ended_at - kill["ts"]
    case.note(f"kill -> end {took:.1f} s")
    return took


def kill_when_fired(r, fired_key: str, pid: int) -> None:
    """SIGKILL ``pid`` as soon as the turn's crash point has fired (already dead: nothing)."""
    give_up = time.time() + 60
    while r.get(fired_key) is None and time.time() < give_up:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_store_check_sees_a_broken_history():
    """The ledger's history check can fail (it is not a tautology)."""
    calls = [{"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
             {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}}]
    good = [{"role": "assistant", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"}]
    assert history_problems(good) == []
    assert history_problems(good[:2]) != []
    assert history_problems([good[0], good[2], good[1]]) != []
    assert history_problems([*good, good[1]]) != []


def test_heard_check_sees_a_repeated_sentence():
    """The ledger's audio check can fail: a sentence heard twice is caught."""
    entries = [StreamEntry("1-0", TurnEvent(type="tts-start", turn_id="t",
                                            data={"seq": 0, "text": "Hello there."})),
               StreamEntry("2-0", TurnEvent(type="reply", turn_id="t",
                                            data={"text": "Hello there."}))]
    one = expected_pcm("Hello there.")
    assert heard_problems(entries, one, expected_pcm) == []
    assert heard_problems(entries, one + one[:3200], expected_pcm) != []
