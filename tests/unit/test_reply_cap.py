"""The reply's cap: ``cut_reply`` cuts at the last sentence end that fits (else the last whole
word), and the agent's speaker keeps no sentence past the cap, streamed or not, so that the
sentences sent to TTS are the reply recorded; each piece is charged to its gateway device's
characters budget once. The speaker's TTS jobs are read back from Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.unit.runtimes import installed
from tests.unit.test_speaker_filter import sent_jobs
from voxqueue.budgets import SPEAK_CHARS, counters
from voxqueue.contracts import TurnSpec
from voxqueue.settings import AgentSettings, RedisSettings, Settings, TurnSettings
from voxqueue.spoken.sentences import SentenceSplitter, cut_reply, ends_sentence
from workers.agent.reply_sentences import Speaker
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage
from workers.wiring import runtime_for

CAP = 120
REPLY = ("The first sentence is short. The second sentence is a little longer than that. "
         "A third sentence would go past the cap of one hundred and twenty characters. "
         "And a fourth is never even looked at.")


# -- cut_reply -----------------------------------------------------------------------------------
def test_a_text_that_fits_is_whole():
    assert cut_reply("Short. Reply.", 13) == "Short. Reply."
    assert cut_reply("", 5) == ""


def test_the_cut_is_at_the_last_sentence_end_that_fits():
    text = "One is here. Two is there! Three? Four goes on and on"
    assert cut_reply(text, 36) == "One is here. Two is there! Three?"
    assert cut_reply(text, 32) == "One is here. Two is there!"
    assert cut_reply('He said "stop." Then more words', 20) == 'He said "stop."'


def test_a_sentence_end_exactly_at_the_cap_is_kept():
    text = "Exactly twenty chars. And more."
    assert len("Exactly twenty chars.") == 21
    assert cut_reply(text, 21) == "Exactly twenty chars."
    assert cut_reply(text, 20) == "Exactly twenty"  # no sentence end fits: whole words


def test_with_no_sentence_end_the_cut_is_at_the_last_whole_word():
    assert cut_reply("one two three four five", 12) == "one two"
    assert cut_reply("one two three four five", 13) == "one two three"
    assert cut_reply("abcdefghijklmnop", 5) == "abcde"  # one word longer than the cap
    assert cut_reply("Ends here. Then a longer one", 8, words=False) == ""
    assert cut_reply("Ask Dr. Smith about it today", 12) == "Ask Dr."  # a word cut, not an end


def test_numbers_and_abbreviations_are_no_sentence_end():
    assert cut_reply("Pi is 3.14159 and e is 2.71 or so", 20) == "Pi is 3.14159 and e"
    assert cut_reply("It is true. Ask Dr. Who now", 21) == "It is true."


def test_unicode_counts_characters_and_knows_other_scripts_ends():
    text = "Größe ist gut… Überall schön. Zuletzt kommt noch mehr"
    assert cut_reply(text, 30) == "Größe ist gut… Überall schön."
    assert cut_reply(text, 15) == "Größe ist gut…"
    assert cut_reply("你好。今天天气很好！我们去公园吧", 10) == "你好。今天天气很好！"
    assert cut_reply("Привет мир. Как дела? Хорошо", 22) == "Привет мир. Как дела?"
    emoji = "🎉" * 10 + " party"
    assert cut_reply(emoji, 12) == "🎉" * 10 and len(cut_reply(emoji, 12)) == 10


def test_a_sentence_end_is_known_at_the_end_of_a_text():
    assert ends_sentence("It is done.") and ends_sentence('He said "go!"')
    assert ends_sentence("你好。") and not ends_sentence("It goes on") and not ends_sentence("")


# -- the speaker -------------------------------------------------------------------------------
@pytest.fixture
def rt(redis_server) -> Iterator[Runtime]:  # type: ignore[no-untyped-def]
    url = redis_server.url.rsplit("/", 1)[0] + "/15"
    runtime = runtime_for(Settings(
        redis=RedisSettings(url=url, key_prefix=f"vqc-{uuid.uuid4().hex[:8]}"),
        agent=AgentSettings(first_phrase_words=0),
        turns=TurnSettings(reply_max_chars=CAP)))
    runtime.redis.delete("tts")
    with installed(runtime):
        yield runtime
    runtime.redis.delete("tts")


def speaker_of(rt: Runtime, session: str = "s", device: str | None = None,
               reply_chars: int = 0) -> Speaker:
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=session, device=device,
                    input="text", text="how?", created_at=now, deadline=now + 30)
    rt.store.create(spec)
    return Speaker(Stage(rt, spec, "agent", 1), step=1, reply_chars=reply_chars)


def stream(speaker: Speaker, text: str) -> str:
    """Stream ``text`` as a model does, end the answer; what the step records."""
    for i in range(0, len(text), 7):
        speaker.on_text(text[i:i + 7])
    speaker.finish(text)
    return speaker.said(text)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_no_sentence_past_the_cap_is_sent_and_the_record_is_what_was_sent(rt, streamed):
    speaker = speaker_of(rt)
    recorded = stream(speaker, REPLY) if streamed else (speaker.finish(REPLY),
                                                         speaker.said(REPLY))[1]
    sent = " ".join(job.text for job in sent_jobs(rt))
    assert recorded == sent == ("The first sentence is short. The second sentence is a "
                                "little longer than that.")
    assert len(recorded) <= CAP and speaker.capped


def test_a_first_sentence_over_the_cap_is_cut_at_a_word(rt):
    speaker = speaker_of(rt)
    text = "word " * 60 + "end."
    recorded = stream(speaker, text)
    assert recorded == " ".join(j.text for j in sent_jobs(rt)) == ("word " * 24).strip()


def test_a_long_first_sentence_after_its_first_phrase_is_cut_at_a_word(rt):
    """The reply's first phrase goes early ("... goes on"): it ends no sentence, so the rest of
    a first sentence over the cap is cut at a word, not dropped."""
    speaker = speaker_of(rt)
    speaker.splitter = SentenceSplitter(first_phrase_words=4)
    text = "This first sentence goes on " + "and on " * 40 + "until it ends."
    recorded = stream(speaker, text)
    assert len(speaker.sentences) == 2, speaker.sentences  # the first phrase, then the rest
    assert recorded == " ".join(j.text for j in sent_jobs(rt))
    assert text.startswith(recorded) and CAP - 7 < len(recorded) <= CAP


def test_a_later_step_has_what_the_earlier_ones_left(rt):
    speaker = speaker_of(rt, reply_chars=CAP - 40)
    recorded = stream(speaker, REPLY)
    assert recorded == "The first sentence is short."
    full = speaker_of(rt, reply_chars=CAP)
    assert stream(full, "Nothing more fits here.") == ""


def test_a_reply_that_fits_is_recorded_as_the_model_wrote_it(rt):
    speaker = speaker_of(rt)
    text = "**Short** and *sweet*."
    assert stream(speaker, text) == text and not speaker.capped


def test_each_piece_is_charged_once_to_its_gateway_device(rt):
    device = f"d{uuid.uuid4().hex[:6]}"
    speaker = speaker_of(rt, session=f"dev:{device}:x", device=device)
    stream(speaker, REPLY)
    Speaker(speaker.stage, step=1).resend(speaker.sentences)  # the step run again
    minute, hour = counters(rt.keys, device, SPEAK_CHARS, time.time())
    charged = sum(len(job.text) for job in sent_jobs(rt))
    assert charged > 0
    assert float(rt.redis.get(minute[0]) or 0) == float(rt.redis.get(hour[0]) or 0) == charged
    assert 0 < rt.redis.ttl(minute[0]) <= 120


def test_a_turn_of_no_gateway_device_is_charged_nothing(rt):
    speaker = speaker_of(rt, session="wyoming-x", device="wyoming")
    stream(speaker, REPLY)
    assert sent_jobs(rt) and not list(rt.redis.scan_iter(f"{rt.keys.prefix}:device:*"))
