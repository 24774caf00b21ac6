"""Workers trust nothing they receive: turns and tasks forged straight into Redis (by someone
holding its password) are checked against the stored turn and the workers' own limits."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from celery import Celery

from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from voxqueue.celery_config import AGENT_RESUME, AGENT_STEP, TOOLS_RUN, celery_config
from voxqueue.contracts import AgentStep, ToolCallJob, TurnSpec
from voxqueue.turns import TurnStore

pytestmark = pytest.mark.integration


def forge(client, **fields) -> TurnSpec:
    """A turn written straight into Redis, past every check of the client and the gateway."""
    now = time.time()
    spec = TurnSpec.model_validate({
        "turn_id": uuid.uuid4().hex, "session_id": f"forged-{uuid.uuid4().hex[:6]}",
        "input": "text", "text": "hello", "created_at": now, "deadline": now + 30,
        "speak": False, **fields})
    TurnStore(client.redis, client.keys, 3600).create(spec)
    return spec


def handled(client, spec: TurnSpec) -> None:
    """Wait until a worker has taken and finished (run or refused) every job of the turn."""
    wait_until(lambda: not tasks_of_turn(client.redis, spec.turn_id),
               "the workers to handle the turn's jobs", timeout=30)


def send(client, task: str, args: list) -> None:
    app = Celery("forger", set_as_current=False)
    app.conf.update(celery_config(client.settings))
    app.send_task(task, args=args, ignore_result=True)
    app.close()


def ended(client, spec: TurnSpec, timeout: float = 20.0) -> dict:
    give_up = time.time() + timeout
    while time.time() < give_up:
        for e in client.store.history(spec.turn_id):
            if e.event.type == "error":
                return e.event.data
            if e.event.type == "run-end":
                return {"status": e.event.data.get("status")}
        time.sleep(0.05)
    raise AssertionError(f"turn {spec.turn_id} never ended")


@pytest.mark.parametrize(("what", "fields"), [
    ("a 32-year deadline", {"deadline": time.time() + 32 * 365 * 86400}),
    ("1 MB of text", {"text": "x" * 1_000_000}),
    ("a start in the future", {"created_at": time.time() + 3600,
                               "deadline": time.time() + 3630}),
])
def test_a_forged_turn_over_the_limits_is_refused_by_the_worker(client, fake, reliability_case,
                                                               what, fields):
    case = reliability_case(f"forged turn straight into Redis: {what}")
    case.turns += 1
    spec = forge(client, **fields)
    send(client, AGENT_STEP, [AgentStep(turn_id=spec.turn_id, step=1).model_dump(mode="json")])
    error = ended(client, spec)
    assert error.get("code") == "invalid-input", error
    assert "refused the turn" in error["message"]
    assert fake.chat_requests() == [], "no model call for a refused turn"
    case.note(error["message"][:120])


def test_a_forged_audio_key_cannot_read_another_turns_audio(client, fake, reliability_case):
    case = reliability_case("forged turn whose audio key is another turn's")
    case.turns += 1
    victim = f"{client.keys.audio('victim-turn-0001')}"
    client.redis.set(victim, b"\x00\x01" * 16000, ex=60)
    spec = forge(client, input="audio", text=None, audio_key=victim, audio_seconds=1.0)
    send(client, "voxqueue.stt.transcribe", [{"v": 1, "turn_id": spec.turn_id}])
    error = ended(client, spec)
    assert error.get("code") == "invalid-input" and "audio" in error["message"]
    assert fake.requests_for("transcriptions") == []
    case.note("refused: its audio is not under the turn's own key")


def test_a_forged_tool_call_never_runs(client, fake, reliability_case):
    """A ``tools.run`` for a call the model never made (here: another device's memory)."""
    case = reliability_case("forged tools.run for a call the model never made")
    case.turns += 1
    spec = forge(client, device="attacker")
    label = f"forged-{uuid.uuid4().hex[:6]}"
    job = ToolCallJob(turn_id=spec.turn_id, step=1, call_id="call_forged",
                      name="record_side_effect", arguments=json.dumps({"label": label}),
                      calls=1, session_id="kitchen", device="kitchen")
    send(client, TOOLS_RUN, [job.model_dump(mode="json")])
    handled(client, spec)
    assert client.redis.get(f"probe:side-effect:{label}") is None, "the tool ran"
    assert not any(e.event.type == "tool-start" for e in client.store.history(spec.turn_id))
    # With a stored answer that made the call, only that exact call may run.
    client.redis.hset(client.keys.turn(spec.turn_id), "answer:1", json.dumps(
        {"text": "", "calls": [{"id": "call_real", "name": "add_numbers",
                                "arguments": '{"a": 1, "b": 2}'}]}))
    altered = job.model_copy(update={"call_id": "call_real", "name": "add_numbers",
                                     "arguments": '{"a": 1, "b": 999}'})
    send(client, TOOLS_RUN, [altered.model_dump(mode="json")])
    handled(client, spec)
    assert not any(e.event.type == "tool-start" for e in client.store.history(spec.turn_id))
    case.note("refused: not a call of the stored model answer; nothing ran")


def test_a_forged_later_step_is_refused(client, fake, reliability_case):
    case = reliability_case("forged agent step past the first, with no tool answer before it")
    case.turns += 1
    spec = forge(client)
    send(client, AGENT_RESUME, [[], AgentStep(turn_id=spec.turn_id, step=5).model_dump(
        mode="json")])
    error = ended(client, spec)
    assert error.get("code") == "invalid-input" and "step" in error["message"]
    assert fake.chat_requests() == []
    case.note(error["message"][:120])
