"""The agent's speaker cuts the reply into TTS jobs from text for the ear, or, with
``VOXQUEUE_SPEECH_FILTER=false``, from the model's text as written: the jobs it sends to the
``tts`` queue, read back from Redis."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.unit.runtimes import installed
from voxqueue.contracts import TtsJob, TurnSpec
from voxqueue.settings import AgentSettings, RedisSettings, Settings
from workers.agent.reply_sentences import Speaker
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage
from workers.wiring import runtime_for

DB = 15
REPLY = ("**Sure!** Here is how:\n\n1. Open the [garden app](https://example.com/g?id=42).\n"
         "2. Press `start` 🚀\n")


@contextmanager
def speaker_runtime(redis_server, speech_filter: bool) -> Iterator[Runtime]:  # type: ignore[no-untyped-def]
    """A runtime on a private key prefix whose ``tts`` queue starts and ends empty."""
    url = redis_server.url.rsplit("/", 1)[0] + f"/{DB}"
    runtime = runtime_for(Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqs-{uuid.uuid4().hex[:8]}"),
        agent=AgentSettings(speech_filter=speech_filter, first_phrase_words=0)))
    runtime.redis.delete("tts")
    with installed(runtime):
        yield runtime
    runtime.redis.delete("tts")


@pytest.fixture(params=[True, False], ids=["filter on", "filter off"])
def rt(request: pytest.FixtureRequest, redis_server) -> Iterator[Runtime]:  # type: ignore[no-untyped-def]
    with speaker_runtime(redis_server, request.param) as runtime:
        yield runtime


def sent_jobs(rt: Runtime) -> list[TtsJob]:
    """The TTS jobs waiting in the ``tts`` queue, oldest first (kombu's message envelope)."""
    jobs = []
    for raw in reversed(rt.redis.lrange("tts", 0, -1)):
        body = json.loads(base64.b64decode(json.loads(raw)["body"]))
        jobs.append(TtsJob.model_validate(body[0][0]))
    return jobs


def new_speaker(rt: Runtime, speak: bool = True) -> Speaker:
    """The speaker of step 1 of a new turn (spoken, unless ``speak`` is False)."""
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="how?",
                    created_at=now, deadline=now + 30, speak=speak)
    rt.store.create(spec)
    return Speaker(Stage(rt, spec, "agent", 1), step=1)


def pieces_of(speaker: Speaker) -> list[str]:
    """The text of each piece the speaker sent, in order."""
    return [" ".join(speaker.sentences[start:start + n]) for start, n in speaker.pieces]


def test_the_reply_is_cut_from_what_will_be_said(rt):
    speaker = new_speaker(rt)
    for i in range(0, len(REPLY), 5):  # streamed as a model streams it
        speaker.on_text(REPLY[i:i + 5])
    speaker.finish(REPLY)
    said = [job.text for job in sent_jobs(rt)]
    assert said == pieces_of(speaker)  # stored with the answer, for a step run again
    if rt.settings.agent.speech_filter:
        assert speaker.sentences == ["Sure! Here is how.", "Open the garden app.", "Press start."]
        assert " ".join(said) == "Sure! Here is how. Open the garden app. Press start."
    else:  # the model's text, markup and all
        assert "**Sure!**" in said[0] and any("garden app](https://" in s for s in said)


LONG = ("This first sentence is long enough to give the listener some seconds of speech to hear. "
        "Then more words follow here, one by one, as a model streams them to us. And the end.")


def test_reads_pause_only_once_a_sentence_is_out_and_while_the_listener_has_enough(rt):
    speaker = new_speaker(rt)
    clock = [1000.0]
    slept: list[float] = []
    speaker.clock = lambda: clock[0]  # type: ignore[method-assign]

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    speaker.sleep = sleep  # type: ignore[method-assign]
    words = [w + " " for w in LONG.split()]
    first_end = next(i for i, w in enumerate(words) if w.endswith(". "))

    def token(word: str, gap: float) -> None:
        clock[0] += gap  # the read waited this long for the token
        speaker.on_text(word)

    for word in words[:first_end]:
        token(word, 0.02)
    assert slept == []  # nothing is heard yet: every token is read as it comes
    for word in words[first_end:first_end + 3]:  # tokens already there when read
        token(word, 0.0)
    assert len(sent_jobs(rt)) == 1  # the first sentence is out: the listener has ~4 s
    # The model's pace (a token each 0.02 s) says the pile is read after the first of these:
    # a pause then, not after a read that waits; the tokens piled up meanwhile are read
    # without one.
    assert slept == [0.2]
    for word in words[first_end + 3:first_end + 7]:
        token(word, 0.02)
    assert len(slept) == 5 and max(slept) <= 0.2  # each read that waited: a pause
    clock[0] += 10.0  # the listener has heard all it was sent
    before = len(slept)
    for word in words[first_end + 8:]:
        token(word, 0.02)
    assert len(slept) == before  # no pause when the next sentence is needed soon
    speaker.finish(LONG)
    assert [j.text for j in sent_jobs(rt)] == pieces_of(speaker)
    assert " ".join(pieces_of(speaker)) == " ".join(speaker.sentences)
