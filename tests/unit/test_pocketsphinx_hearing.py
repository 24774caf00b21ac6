"""pocketsphinx hearing a command as it arrives (``PocketsphinxHearing``), on real recordings:
the same request as the whole-utterance decode, partials that do not end the utterance, a
finish at a pause that the speaker talks past, free speech decoded whole at its end."""

from __future__ import annotations

import wave

import pytest

from tests.conftest import SPEECH
from voxqueue.settings import Settings
from workers.intents.endings import sounds_unfinished
from workers.stt.providers.base import LiveTranscriber
from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber
from workers.tool_registry.assembly import assemble_tools

PIECE = 1920  # 60 ms, as a device streams it


def pcm_of(name: str) -> bytes:
    with wave.open(str(SPEECH / name), "rb") as w:
        return w.readframes(w.getnframes())


@pytest.fixture(scope="module")
def stt() -> PocketsphinxTranscriber:
    settings = Settings()
    return PocketsphinxTranscriber(settings, assemble_tools(settings))


def calls(stt: PocketsphinxTranscriber, text: str) -> list[tuple[str, dict]]:
    return [(c.tool, c.arguments) for c in stt.matcher.match(text)]


def heard(stt: PocketsphinxTranscriber, pcm: bytes, *, finish_at: int | None = None) -> str:
    hearing = stt.hear()
    assert hearing is not None
    try:
        for at in range(0, len(pcm), PIECE):
            if at == finish_at:
                hearing.finish()  # a pause that looked like the end
            hearing.feed(pcm[at:at + PIECE])
        return hearing.finish().text
    finally:
        hearing.close()


def test_pocketsphinx_is_a_listener(stt):
    assert isinstance(stt, LiveTranscriber)


@pytest.mark.parametrize("name", ["okay_nabu_timer.wav", "command_multiply.wav",
                                  "hey_jarvis_time_tokyo.wav", "command_weather_paris.wav"])
def test_a_command_heard_live_is_the_same_request_as_decoded_whole(stt, name):
    pcm = pcm_of(name)
    heard(stt, pcm_of("command_time.wav"))  # the live decoders adapt to the voice first
    whole = stt.transcribe(pcm, deadline=0).text
    live = heard(stt, pcm)
    assert calls(stt, live) and calls(stt, live) == calls(stt, whole), (live, whole)


def test_partials_say_the_words_so_far_and_the_utterance_goes_on(stt):
    pcm = pcm_of("okay_nabu_timer.wav")
    hearing = stt.hear()
    assert hearing is not None
    try:
        partials = []
        for at in range(0, len(pcm), PIECE):
            hearing.feed(pcm[at:at + PIECE])
            partials.append(hearing.partial().text)
        final = hearing.finish().text
    finally:
        hearing.close()
    assert partials[0] == "" and partials[-1] == final
    assert calls(stt, final) == [("set_timer", {"duration": "5 minutes"})]


def test_a_finish_at_a_pause_the_speaker_talks_past_hears_it_all(stt):
    pcm = pcm_of("command_multiply.wav")
    middle = len(pcm) // 2 // PIECE * PIECE
    text = heard(stt, pcm, finish_at=middle)
    assert calls(stt, text) == calls(stt, "what is twelve times thirteen"), text


def test_free_speech_is_decoded_whole_at_its_end(stt):
    pcm = pcm_of("speech_without_wake_word.wav")
    assert heard(stt, pcm) == stt.transcribe(pcm, deadline=0).text
    assert heard(stt, pcm_of("silence_5s.wav")) == ""


def test_one_command_at_a_time_is_heard_live_per_process(stt):
    first = stt.hear()
    assert first is not None
    assert stt.hear() is None  # the caller decodes this one whole
    first.close()
    second = stt.hear()
    assert second is not None
    second.close()


@pytest.mark.parametrize(("text", "hanging"), [
    ("Set a timer for", True), ("What is the weather in", True), ("Remind me to", True),
    ("Set a timer for five minutes", False), ("What time is it", False), ("", False),
])
def test_words_that_stop_mid_sentence(text, hanging):
    assert sounds_unfinished(text) is hanging
