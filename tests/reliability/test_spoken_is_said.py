"""What was spoken is what was said: with a model that words every answer differently and a
voice that never says a sentence the same way twice, a worker killed while the reply is being
cut, stored or spoken leaves a turn whose recorded reply (history and ``reply`` event) is
exactly the sentences sent to TTS, in order, and whose heard audio is each of them, each as one
whole rendition (after, at most, the start of an interrupted one): never two spliced.

Real workers (two on the queue that is killed), real Redis, the providers faked at their HTTP
boundary; ``VOXQUEUE_CRASH_AT=plan`` names each turn's point. (The crash matrix checks every
point with a model and a voice that repeat themselves.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.fakes.provider_server import spoken_pcm
from tests.conftest import RedisServer, System, system_env
from tests.reliability.ledger import audit_entries, heard_problems
from voxqueue.turns import StreamEntry

pytestmark = pytest.mark.integration

QUESTION = "spoken is said question"
#: Three wordings of one answer, as a sampled model gives them call after call.
WORDINGS = [
    "Alpha one opens the answer here. Alpha two comes right after it. Alpha three ends it.",
    "Beta one opens differently now. Beta two follows on from that. Beta three ends it. "
    "Beta four is one more.",
    "Gamma one is yet another start. Gamma two is next in line. Gamma three ends it.",
]
REPLY = "The first sentence of the answer is here. A second one follows it. And a third ends it."
#: (point, whether the model is asked again: killed before the answer was stored); the last
#: two run with ``--crash`` only (the stored answer's replay is the same path as after-reply's).
AGENT_POINTS = [
    pytest.param("agent.mid-stream", True, id="agent.mid-stream"),
    pytest.param("agent.before-answer", True, id="agent.before-answer"),
    pytest.param("agent.after-reply", False, id="agent.after-reply"),
    pytest.param("agent.after-answer", False, id="agent.after-answer", marks=pytest.mark.crash),
    pytest.param("agent.after-close", False, id="agent.after-close", marks=pytest.mark.crash),
]


@pytest.fixture(scope="module")
def crashing(fake_providers: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """A system whose agent and tts queues have two workers each, on a Redis of its own."""
    server = RedisServer()
    server.start()
    env = system_env(server.url, fake_providers, VOXQUEUE_CRASH_AT="plan",
                     VOXQUEUE_MAX_DELIVERIES="4")
    system = System(env, tmp_path_factory.mktemp("spoken"))
    for queue, copies in (("stt", 1), ("agent", 2), ("tools", 1), ("tts", 2), ("monitor", 1)):
        for n in range(copies):
            name = f"{queue}-{n}"
            system.sup.start(f"worker-{name}", system.sup.worker_argv(
                [queue], name=name, concurrency=2))
    system.sup.start("beat", system.sup.beat_argv())
    system.sup.wait_for_workers(("stt", "agent", "tools", "tts", "monitor"))
    yield system
    system.stop()
    server.stop()


def crashed_turn(system: System, point: str) -> tuple[list[StreamEntry], bytes, list[Any]]:
    """One spoken turn killed at ``point``: its events, the audio heard, its history; checked
    to end once, ok, with nothing twice."""
    system.restart_dead()
    client = system.client()
    session = f"spoken-{point}-{uuid.uuid4().hex[:8]}"
    client.redis.set(client.keys.crash_plan(session), point, ex=600)
    turn = client.ask(QUESTION, session=session)
    played = b"".join(turn.playback(timeout=120))
    entries = list(client.store.history(turn.turn_id))
    found = audit_entries(turn.turn_id, turn.spec.deadline, entries)
    assert client.redis.get(client.keys.crash_fired(turn.turn_id)) is not None, \
        f"the crash point {point} was never reached: {system.logs()}"
    assert found.run_ends == 1 and not found.lost and found.status == "ok", found
    assert found.duplicates == 0 and found.after_end == 0, found
    history = [json.loads(m) for m in client.redis.lrange(client.keys.messages(session), 0, -1)]
    return entries, played, history


def spoken_sentences(entries: list[StreamEntry]) -> list[str]:
    """The text of each piece sent to TTS, in speaking order (``tts-start``)."""
    texts = {int(e.event.data["seq"]): str(e.event.data["text"])
             for e in entries if e.event.type == "tts-start"}
    return [texts[s] for s in sorted(texts)]


@pytest.mark.parametrize(("point", "asked_again"), AGENT_POINTS)
def test_the_recorded_reply_is_the_spoken_one_when_the_agent_dies(crashing, fake_providers,
                                                                   point, asked_again):
    fake = fake_providers
    fake.reset()
    fake.script_chat({"match": QUESTION, "repeat": True, "variants": WORDINGS})
    entries, played, history = crashed_turn(crashing, point)

    replies = [str(e.event.data["text"]) for e in entries if e.event.type == "reply"]
    spoken = " ".join(spoken_sentences(entries))
    assert replies == [spoken]  # the reply event is what was sent to TTS, in order
    assert history[-1] == {"role": "assistant", "content": spoken}
    assert heard_problems(entries, played, spoken_pcm) == []  # and what the client heard
    asked = len(fake.chat_requests())
    if asked_again:
        # The model was asked again and worded it otherwise: the answer starts with what the
        # first attempt spoke and goes on with the second wording.
        assert asked == 2 and spoken.startswith("Alpha one") and "Beta" in spoken, spoken
        assert "Alpha three" not in spoken and "Beta one" not in spoken, spoken
    else:
        assert asked == 1 and spoken == WORDINGS[0]


def test_a_sentence_interrupted_by_a_tts_crash_is_heard_whole_in_one_rendition(
        crashing, fake_providers):
    fake = fake_providers
    fake.reset()
    fake.vary_voice()
    fake.script_chat({"match": QUESTION, "repeat": True, "content": REPLY})
    entries, played, history = crashed_turn(crashing, "tts.mid-stream")

    sentences = spoken_sentences(entries)
    assert history[-1] == {"role": "assistant", "content": " ".join(sentences)}
    renditions: dict[str, list[int]] = {}
    for request in fake.requests_for("tts"):
        renditions.setdefault(request["json"]["text"], []).append(request["rendition"])
    assert any(len(made) > 1 for made in renditions.values()), \
        f"precondition: a sentence was synthesized twice: {renditions}"
    assert heard_in_renditions(played, sentences, renditions) == []


def heard_in_renditions(played: bytes, sentences: list[str],
                        renditions: dict[str, list[int]]) -> list[str]:
    """Why ``played`` is not, sentence after sentence, the sentence's last rendition whole,
    after at most the start of an earlier one (what was heard before it was interrupted)."""
    pos = 0
    for text in sentences:
        *earlier, last = renditions[text]
        whole = spoken_pcm(text, rendition=last)
        at = played.find(whole, pos)
        if at < 0:
            return [f"{text!r}: its rendition {last} is not heard whole after byte {pos}"]
        start = played[pos:at]
        if start and not any(spoken_pcm(text, rendition=r).startswith(start) for r in earlier):
            return [f"{text!r}: {len(start)} bytes before it are no start of a rendition"]
        pos = at + len(whole)
    return [] if pos == len(played) else [f"{len(played) - pos} bytes heard after the reply"]


def test_the_rendition_check_sees_a_splice():
    """``heard_in_renditions`` can fail: two renditions spliced at a byte offset are caught."""
    text = "A sentence said twice."
    first, second = spoken_pcm(text, rendition=0), spoken_pcm(text, rendition=1)
    assert first != second and len(first) == len(second)
    assert heard_in_renditions(first[:640] + second, [text], {text: [0, 1]}) == []
    assert heard_in_renditions(first[:640] + second[640:], [text], {text: [0, 1]}) != []
