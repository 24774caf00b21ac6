"""A device's replies are read aloud on its characters budget, as ``/v1/speak`` is (issue #44,
"budgets per device"): the characters of every piece of a reply sent to TTS are counted on the
device's counters, a spoken turn holds the longest reply's worth while it is in flight, and a
device whose characters are used up is refused a spoken turn with 429 and Retry-After, while
another device goes on. ``voxqueue gateway`` in its own process in front of real workers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_gateway import Gateway, running_gateway
from tests.integration.test_reply_cap import spoken_pieces
from voxqueue.budgets import SPEAK_CHARS, counters

pytestmark = pytest.mark.integration

#: Characters an hour (the minute's budget is out of the way: a minute turns over too soon).
PER_HOUR = 300
#: One reply: under the budget alone, over it twice.
REPLY = ("The kettle is on and the tea will be ready in about four minutes from now. "
         "The milk is in the fridge and the biscuits are in the tin beside the bread bin.")


@pytest.fixture(scope="module")
def gateway(system, tmp_path_factory) -> Iterator[Gateway]:
    with running_gateway(system, tmp_path_factory.mktemp("replies"),
                         VOXQUEUE_GATEWAY_SPEAK_CHARS_PER_MINUTE="100000",
                         VOXQUEUE_GATEWAY_SPEAK_CHARS_PER_HOUR=str(PER_HOUR)) as running:
        yield running


def hour_charged(client: Any, device: str) -> float:
    _minute, (hour, _ttl) = counters(client.keys, device, SPEAK_CHARS, time.time())
    return float(client.redis.get(hour) or 0)


def ask(device: Any, session: str, speak: bool = True) -> Any:
    return device.http.post("/v1/turns", json={"text": "is the kettle on", "session": session,
                                               "speak": speak})


def test_replies_spend_the_device_s_characters_and_a_spent_device_is_refused(
        gateway, client, fake, reliability_case):
    case = reliability_case("gateway: spoken replies past the device's characters an hour")
    assert PER_HOUR / 2 < len(REPLY) < PER_HOUR
    fake.script_chat({"match": "kettle", "repeat": True, "content": REPLY})
    for _ in range(2):  # once more if the hour turned over meanwhile (its counters start anew)
        hour = int(time.time() // 3600)
        name, other_name = f"rb-{uuid.uuid4().hex[:8]}", f"rb-{uuid.uuid4().hex[:8]}"
        with gateway.device(name) as device, gateway.device(other_name) as other:
            spoken = []
            for _ in range(2):
                turn = device.ask("is the kettle on", session="k")
                assert turn.wait(timeout=60).reply == REPLY
                spoken += spoken_pieces(client, turn.turn_id)
            charged = hour_charged(client, name)
            refused = ask(device, "k")
            silent = ask(device, "quiet", speak=False)  # nothing read aloud: not refused
            theirs = other.ask("is the kettle on", session="k").wait(timeout=60)
        if int(time.time() // 3600) == hour:
            break
    assert " ".join(spoken) == f"{REPLY} {REPLY}"
    assert charged == sum(len(piece) for piece in spoken) >= PER_HOUR
    assert refused.status_code == 429 and refused.json()["code"] == "rate-limited", refused.text
    assert SPEAK_CHARS in refused.json()["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 3601
    assert silent.status_code == 201, silent.text
    assert theirs.status == "ok" and theirs.reply == REPLY  # another device is not touched
    assert client.redis.zcard(client.keys.device_held(name, SPEAK_CHARS)) == 0
    case.refused()
    case.note(f"{charged:g} characters of replies counted; the next spoken turn refused")


def test_a_reply_in_flight_holds_the_device_s_characters_until_it_is_recorded(
        gateway, client, fake, reliability_case):
    """Turns started at once in many sessions cannot each speak a reply past the budget."""
    case = reliability_case("gateway: spoken turns started at once past the device's budget")
    fake.script_chat({"match": "kettle", "repeat": True, "content": "It is on."})
    fake.inject("chat", delay=3.0)  # the first reply is still being written
    with gateway.device() as device:
        first = device.ask("is the kettle on", session="a")
        meanwhile = [ask(device, f"s{i}") for i in range(3)]
        assert first.wait(timeout=60).status == "ok"
        after = ask(device, "b")
    assert [r.status_code for r in meanwhile] == [429] * 3, [r.text for r in meanwhile]
    assert 1 <= int(meanwhile[0].headers["Retry-After"]) <= 66  # the hold's end at the latest
    assert after.status_code == 201, after.text  # the hold went with the reply
    case.refused(len(meanwhile))


def test_a_spoken_turn_that_ends_without_a_reply_holds_nothing_after_its_end(
        gateway, fake, reliability_case):
    case = reliability_case("gateway: a cancelled spoken turn keeping its device's characters")
    fake.inject("chat", delay=5.0)
    with gateway.device() as device:
        first = device.ask("is the kettle on", session="a")
        refused = ask(device, "b")
        cancelled = device.http.post(f"/v1/turns/{first.turn_id}/cancel")
        after = ask(device, "b")
    assert refused.status_code == 429 and cancelled.status_code == 202
    assert after.status_code == 201, after.text  # the turn's end took its hold
    case.note("cancelled: the device's next spoken turn is let in at once")
