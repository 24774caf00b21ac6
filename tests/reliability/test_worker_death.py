"""SIGKILL a worker mid-task, on every queue, in both pools: every turn still ends, nothing twice.

- prefork (one child each): the killed child's task is rejected and requeued at once
  (``task_reject_on_worker_lost``) and a new child takes it;
- threads (the default of ``voxqueue up``, ``voxqueue worker``, compose and Kubernetes): the
  whole worker dies, nothing requeues its task; it is started again at once (as ``up`` or
  Kubernetes would) and the task comes back when its lease runs out (a few seconds).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from tests.conftest import SPEECH, RedisServer, System, system_env
from tests.reliability.ledger import audit
from voxqueue.up.restarts import RestartPolicy

pytestmark = pytest.mark.integration
QUEUES = ("stt", "agent", "tools", "tts", "monitor")
#: Each kill scenario once per pool by default (CI's time budget);
#: VOXQUEUE_TEST_KILL_ROUNDS=3 runs each three times.
ROUNDS = int(os.environ.get("VOXQUEUE_TEST_KILL_ROUNDS", "1"))


@pytest.fixture(scope="module", params=["prefork", "threads"])
def prefork(request, fake_providers, tmp_path_factory):
    """Workers of one pool on a Redis of their own; in the threads pool a dead worker is
    started again at once by the supervisor, as ``voxqueue up`` does."""
    pool = request.param
    server = RedisServer()
    server.start()
    env = system_env(server.url, fake_providers, VOXQUEUE_MAX_DELIVERIES="3")
    system = System(env, tmp_path_factory.mktemp(f"{pool}-logs"))
    system.pool = pool
    system.sup.restart = RestartPolicy(first_s=0.1, max_s=0.5)
    system.sup.log = lambda line: None
    for queue in QUEUES:
        system.sup.start(
            f"worker-{queue}",
            system.sup.worker_argv([queue], name=queue, pool=pool,
                                   concurrency=1 if pool == "prefork" else 4),
        )
    system.sup.start("beat", system.sup.beat_argv())
    system.sup.wait_for_workers(QUEUES)
    watcher = threading.Thread(target=system.sup.watch, args=(0.1,), daemon=True)
    watcher.start()
    yield system
    system.sup.stopping = True
    watcher.join(2)
    system.stop()
    server.stop()


@pytest.fixture
def fake(fake_providers):
    fake_providers.reset()
    return fake_providers


def child_of(system: System, queue: str) -> int:
    """The pid running the queue's tasks: the prefork child, or the threads worker itself."""
    main = next(p for p in system.sup.procs if p.name == f"worker-{queue}")
    if system.pool == "threads":
        return main.popen.pid
    out = subprocess.run(["pgrep", "-P", str(main.popen.pid)], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1, pids
    return pids[0]


def wait_for(system: System, turn_id: str, kind: str, timeout: float = 20) -> None:
    store = system.client().store
    give_up = time.time() + timeout
    while time.time() < give_up:
        if any(e.event.type == kind for e in store.history(turn_id)):
            return
        time.sleep(0.02)
    raise AssertionError(f"no {kind} event in turn {turn_id}")


def kill_child_after(system: System, turn_id: str, queue: str, kind: str) -> float:
    """SIGKILL what runs the queue's task once the turn shows ``kind``; the time of the kill."""
    wait_for(system, turn_id, kind)
    pid = child_of(system, queue)
    os.kill(pid, signal.SIGKILL)
    return time.time()


@pytest.fixture
def row(prefork, reliability_case):
    """Adds the turn to the reliability table: audited, with the time from kill to its end."""

    def record(what: str, turn, killed_at: float) -> None:
        case = reliability_case(f"worker SIGKILLed mid-task ({prefork.pool} pool): {what}")
        case.turns += 1
        found = audit(prefork.client().store, turn)
        case.count(found)
        case.note(f"ended {found.status} {found.ended_at - killed_at:.1f} s after the kill")

    return record


def kinds(turn) -> list[str]:
    return [e.event.type for e in turn._entries]


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_stt_worker_killed_mid_transcription(prefork, fake, row, round_):
    fake.inject("transcriptions", delay=3.0)
    fake.script_transcripts("what time is it", "what time is it")
    turn = prefork.client().say(SPEECH / "command_time.wav", session=f"kill-stt-{round_}")
    killed = kill_child_after(prefork, turn.turn_id, "stt", "stt-start")
    result = turn.wait(timeout=60)
    row("stt, mid-transcription", turn, killed)
    assert result.status == "ok", result.error
    assert kinds(turn).count("stt-start") == 2 and kinds(turn).count("stt-end") == 1
    assert kinds(turn).count("run-end") == 1


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_agent_worker_killed_mid_llm_call(prefork, fake, row, round_):
    fake.inject("chat", delay=3.0)
    fake.script_chat({"match": "killed agent", "repeat": True, "content": "Still here."})
    session = f"kill-agent-{round_}"
    turn = prefork.client().ask("killed agent question", session=session)
    killed = kill_child_after(prefork, turn.turn_id, "agent", "llm-start")
    result = turn.wait(timeout=60)
    row("agent, mid-LLM call", turn, killed)
    assert result.status == "ok", result.error
    assert kinds(turn).count("reply") == 1
    client = prefork.client()
    history = [json.loads(m) for m in client.redis.lrange(client.keys.messages(session), 0, -1)]
    assert [m["role"] for m in history] == ["system", "user", "assistant"]
    assert len(turn.audio()) > 0


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "at-most-once"])
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_tools_worker_killed_mid_side_effect_never_runs_it_twice(prefork, fake, row, round_,
                                                                 idempotent):
    """An idempotent tool runs again with its call's key (its effect once, the model told it
    is done); any other is not run again, and the model is told it may or may not have run."""
    label = f"round-{round_}-{time.time()}"
    tool = "record_side_effect" if idempotent else "record_side_effect_at_most_once"
    fake.script_chat(
        {
            "match": "side effect",
            "tool_calls": [{"name": tool, "arguments": {"label": label}}],
        },
        {"after_tool": True, "content": "I tried."},
    )
    turn = prefork.client().ask("do the side effect", session=f"kill-tools-{round_}", speak=False)
    wait_for(prefork, turn.turn_id, "tool-start")
    # the kill lands once the action has happened (tool-start is written just before the call)
    probe = f"probe:side-effect:{label}"
    give_up = time.time() + 20
    while prefork.client().redis.get(probe) is None and time.time() < give_up:
        time.sleep(0.02)
    killed = kill_child_after(prefork, turn.turn_id, "tools", "tool-start")
    result = turn.wait(timeout=60)
    row("tools, mid side-effecting tool", turn, killed)
    assert result.status == "ok", result.error
    assert int(prefork.client().redis.get(probe)) == 1
    (call,) = result.tool_calls
    if idempotent:
        assert call.error is None and call.result == "done 1", call
    else:
        assert call.error and "not repeated" in call.error and "may or may not" in call.error
    assert kinds(turn).count("tool-end") == 1


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_tts_worker_killed_mid_sentence_speaks_it_once(prefork, fake, row, round_):
    fake.set_profile(tts_rtf=1.0)  # the sentence streams in real time: ~3 s
    text = "This sentence is long enough to be killed half way through."
    fake.script_chat({"match": "speak once", "content": text})
    turn = prefork.client().ask("speak once please", session=f"kill-tts-{round_}")
    played = []

    def listen():
        played.extend(turn.playback(timeout=60))

    import threading

    listener = threading.Thread(target=listen)
    listener.start()
    killed = kill_child_after(prefork, turn.turn_id, "tts", "tts-chunk")
    listener.join(70)
    result = turn.result()
    row("tts, mid-sentence", turn, killed)
    assert result.status == "ok", result.error
    chunks = [e for e in turn._entries if e.event.type == "tts-chunk"]
    attempts = {e.event.data["attempt"] for e in chunks}
    assert attempts == {1, 2}, "precondition: the sentence was synthesized twice"
    keys = [(e.event.data["seq"], e.event.data["idx"], e.event.data["attempt"]) for e in chunks]
    assert len(keys) == len(set(keys))
    whole = sum(e.event.data["bytes"] for e in chunks if e.event.data["attempt"] == 2)
    assert len(b"".join(played)) == whole, "played exactly one sentence's audio"
    assert kinds(turn).count("tts-end") == 1 and kinds(turn).count("run-end") == 1


def test_a_task_that_kills_its_worker_every_time_ends_the_turn_after_n_attempts(
        prefork, fake, reliability_case):
    fake.script_chat(
        {"match": "poison", "tool_calls": [{"name": "kill_my_worker", "arguments": {}}]},
        {"after_tool": True, "content": "Unreachable."},
    )
    turn = prefork.client().ask("poison pill", session="poison", speak=False)
    result = turn.wait(timeout=90)
    case = reliability_case(f"a task that kills its worker every time ({prefork.pool} pool)")
    case.turns += 1
    case.count(audit(prefork.client().store, turn))
    case.note(f"redelivery-cap after 3 deliveries, {result.timings.get('total', 0) / 1000:.0f} s")
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "redelivery-cap"
    assert kinds(turn).count("run-end") == 1
    # The workers keep serving.
    fake.script_chat({"match": "after poison", "content": "Fine again."})
    after = prefork.client().ask("after poison", session="poison-after", speak=False)
    assert after.wait(timeout=60).reply == "Fine again."
