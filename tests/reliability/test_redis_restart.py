"""Redis restarts (append-only file) under a load of turns: everything reconnects, no turn is
lost; Redis killed (SIGKILL) under turns and tools loses no acknowledged write, so no turn is
lost and no effect done twice; Redis down past the deadline ends turns with a clear error,
never a hang."""

from __future__ import annotations

import base64
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from pydantic import SecretStr

from tests.conftest import RedisServer, System, free_port, system_env
from tests.reliability.ledger import audit

pytestmark = pytest.mark.integration


@pytest.fixture
def restartable(fake_providers, tmp_path):
    server = RedisServer()
    server.start()
    flower_port = free_port()
    env = system_env(
        server.url,
        fake_providers,
        VOXQUEUE_FLOWER_PORT=str(flower_port),
        VOXQUEUE_FLOWER_USER="ops",
        VOXQUEUE_FLOWER_PASSWORD="pw",
    )
    system = System(env, tmp_path)
    system.start()
    system.sup.settings = system.sup.settings.replace(
        dashboard={
            "flower_port": flower_port,
            "flower_user": "ops",
            "flower_password": SecretStr("pw"),
        }
    )
    system.sup.start("flower", system.sup.flower_argv(), system.sup.flower_env())
    fake_providers.reset()
    yield server, system, fake_providers, flower_port
    system.stop()
    server.stop()


def flower_status(port: int) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/workers")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"ops:pw").decode())
    try:
        with urllib.request.urlopen(request, timeout=3) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait_until(check, timeout: float) -> bool:
    give_up = time.time() + timeout
    while time.time() < give_up:
        if check():
            return True
        time.sleep(0.25)
    return False


def test_redis_restart_under_load_loses_no_turn(restartable, reliability_case):
    server, system, fake, flower_port = restartable
    case = reliability_case("Redis restarted (append-only file) under 12 turns in flight")
    assert wait_until(lambda: flower_status(flower_port) == 200, 30)
    fake.set_profile(llm_ttft_s=1.0, tts_rtf=0.3)
    fake.script_chat(
        {"match": "during restart", "repeat": True, "content": "I survived the restart. All good."}
    )
    client = system.client()
    turns = [
        client.ask(f"during restart {i}", session=f"restart-{i}", deadline_s=45) for i in range(12)
    ]
    results: dict[str, object] = {}

    def follow(turn):
        results[turn.turn_id] = turn.wait(timeout=90)

    threads = [threading.Thread(target=follow, args=(t,)) for t in turns]
    for t in threads:
        t.start()

    def in_flight() -> bool:  # the work is under way: a model call (1 s to its first token)
        return any(e.event.type == "llm-start" for t in turns
                   for e in client.store.history(t.turn_id))

    assert wait_until(in_flight, 30), "the turns never reached the model"
    server.restart(down_s=1.0)
    for t in threads:
        t.join(100)
    assert len(results) == 12, "every turn ended"
    statuses = [r.status for r in results.values()]
    assert statuses.count("ok") == 12, [(r.status, r.error) for r in results.values()]
    for turn in turns:
        assert [e.event.type for e in turn._entries].count("run-end") == 1
        case.turns += 1
        case.count(audit(client.store, turn))
    # Everything reconnected by itself: a new turn, beat (a timer fires), Flower.
    fake.reset()
    fake.script_chat(
        {
            "match": "timer",
            "tool_calls": [
                {"name": "set_timer", "arguments": {"duration": "1 second", "label": "tea"}}
            ],
        },
        {"after_tool": True, "content": "Timer set."},
    )
    after = client.ask("set a tea timer", session="after-restart", device="kitchen", speak=False)
    assert after.wait(timeout=30).status == "ok"
    announce = client.keys.announcements("kitchen")
    assert wait_until(lambda: client.redis.xlen(announce) >= 1, 20), "beat fired the timer"
    assert wait_until(lambda: flower_status(flower_port) == 200, 30)
    case.turns += 1
    case.count(audit(client.store, after))
    case.note("all 12 ok; workers, beat (a timer fired) and Flower reconnected")


def test_redis_killed_under_turns_and_tools_loses_none_and_doubles_nothing(
        restartable, reliability_case):
    """SIGKILL, not SIGTERM: Redis writes nothing more, so only what its append-only file
    holds comes back (fsynced as users' Redis is: ``VOXQUEUE_REDIS_APPENDFSYNC``, compose)."""
    server, system, fake, _ = restartable
    case = reliability_case("Redis SIGKILLed under 12 turns (6 mid side-effecting tool), "
                            "restarted on its append-only file")
    fake.set_profile(llm_ttft_s=0.5, tts_rtf=0.3)
    labels = [f"redis-kill-{i}-{time.time()}" for i in range(6)]
    fake.script_chat(
        {"after_tool": True, "repeat": True, "content": "It is recorded."},
        {"match": "crash talk", "repeat": True, "content": "I survived the crash. All good."},
        *({"match": f"crash tool {i}", "tool_calls": [
            {"name": "record_side_effect", "arguments": {"label": label}}]}
          for i, label in enumerate(labels)),
    )
    client = system.client()
    turns = [client.ask(f"crash talk {i}", session=f"kill-talk-{i}", deadline_s=45)
             for i in range(6)]
    turns += [client.ask(f"crash tool {i}", session=f"kill-tool-{i}", deadline_s=45)
              for i in range(6)]
    results: dict[str, object] = {}

    def follow(turn):
        results[turn.turn_id] = turn.wait(timeout=90)

    threads = [threading.Thread(target=follow, args=(t,)) for t in turns]
    for t in threads:
        t.start()
    probes = [f"probe:side-effect:{label}" for label in labels]
    assert wait_until(lambda: all(client.redis.exists(p) for p in probes), 20), \
        "the tools are running"
    server.restart(down_s=1.0, sig=signal.SIGKILL)  # mid-tool (each takes 3 s)
    for t in threads:
        t.join(100)
    assert len(results) == 12, "every turn ended"
    for turn in turns:
        found = audit(client.store, turn)
        case.turns += 1
        case.count(found)
        assert not found.lost and found.duplicates == 0, found
        result = results[turn.turn_id]
        assert result.status == "ok" or (result.error or {}).get("code"), result
    assert [int(client.redis.get(p) or 0) for p in probes] == [1] * 6, "each effect once"
    statuses = [r.status for r in results.values()]
    case.note(f"{statuses.count('ok')} of 12 ok, others a clear error; each of the 6 "
              "side effects done once")
    # Every session's next turn works.
    fake.reset()
    fake.script_chat({"match": "again", "repeat": True, "content": "Back to normal."})
    for turn in turns[:1] + turns[6:7]:
        after = client.ask("again", session=turn.spec.session_id, speak=False)
        assert after.wait(timeout=30).status == "ok"


def test_redis_down_past_the_deadline_ends_turns_with_a_clear_error(restartable, reliability_case):
    server, system, fake, _ = restartable
    case = reliability_case("Redis down past the deadline")
    case.turns += 1
    fake.inject("chat", delay=3.0)
    client = system.client()
    turn = client.ask("will redis come back", session="down", deadline_s=4)
    assert wait_until(lambda: any(e.event.type == "llm-start"
                                  for e in client.store.history(turn.turn_id)), 10), "no model call"
    server.stop()  # during the model's (3 s) call
    started = time.time()
    try:
        result = turn.wait(timeout=60)
    finally:
        server.start()
    assert time.time() - started < 4 + 5 + 20, "the client never hangs"
    assert result.status == "timeout"
    assert result.error is not None
    assert result.error["code"] in ("redis-unavailable", "timeout")
    case.note(f"the client ends the turn with {result.error['code']} "
              f"{time.time() - started:.0f} s after Redis went away; no hang")
