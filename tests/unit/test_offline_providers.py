"""The offline providers on real audio: pocketsphinx (biased by the tools' examples) and Piper."""

from __future__ import annotations

import json
import threading
import time
import wave
from typing import Any

import pytest

from tests.conftest import SPEECH
from voxqueue.audio import SAMPLE_RATE, rms
from voxqueue.settings import ProviderSettings, Settings
from workers.intents import IntentMatcher
from workers.intents.vocabulary import spoken_values
from workers.runtime.retry import ProviderError
from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber
from workers.tool_registry.assembly import assemble_tools
from workers.tts.providers.piper_tts import PIECE_BYTES, PiperSynthesizer

MANIFEST = json.loads((SPEECH / "manifest.json").read_text())
#: Commands with a single request each; the 15 s free-form question is left to the bench.
COMMANDS = [
    e
    for e in MANIFEST
    if e["kind"] in ("command", "wake+command") and e["file"] != "long_question.wav"
]


def settings() -> Settings:
    return Settings()


def pcm_of(name: str) -> bytes:
    with wave.open(str(SPEECH / name), "rb") as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        return w.readframes(w.getnframes())


@pytest.fixture(scope="module")
def stt() -> PocketsphinxTranscriber:
    return PocketsphinxTranscriber(settings(), assemble_tools(settings()))


@pytest.fixture(scope="module")
def tts() -> PiperSynthesizer:
    return PiperSynthesizer(settings())


def comparable(matcher: IntentMatcher, text: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls a sentence asks for, free-text arguments left out, case folded."""
    out = []
    for call in matcher.match(text):
        fields = matcher.tools[call.tool].args_model.model_fields
        args = {
            k: str(v).lower()
            for k, v in call.arguments.items()
            if spoken_values(k, fields[k].annotation) is not None
        }
        out.append((call.tool, args))
    return out


@pytest.mark.parametrize("entry", COMMANDS, ids=[e["file"] for e in COMMANDS])
def test_spoken_commands_are_heard_as_the_same_request(stt, entry):
    heard = stt.recognize(pcm_of(entry["file"]))
    expected = comparable(stt.matcher, entry["text"])
    assert expected, "the fixture's own text should be a known request"
    assert comparable(stt.matcher, heard.text) == expected, heard
    assert heard.source == "commands"


def test_the_general_model_alone_gets_commands_wrong(stt):
    """Why the biased model is there: the general one alone misses commands that the biased
    one gets right (each of them, by the test above)."""
    missed = next((e["file"] for e in COMMANDS  # stops at the first miss: ~3 s a decode
                   if comparable(stt.matcher, stt.recognize(pcm_of(e["file"]), biased=False).text)
                   != comparable(stt.matcher, e["text"])), None)
    assert missed is not None, "the general model alone got every command right"


def test_free_speech_falls_back_to_the_general_model(stt):
    heard = stt.recognize(pcm_of("speech_without_wake_word.wav"))
    assert heard.source == "general"
    assert heard.fit is not None and heard.fit < 0
    for word in ("market", "morning", "apples", "cheese", "river"):
        assert word in heard.text


def test_silence_gives_no_text(stt):
    transcript = stt.transcribe(pcm_of("silence_5s.wav"), deadline=time.time() + 30)
    assert transcript.text == ""
    assert transcript.ttfb_ms is not None


def test_the_transcript_starts_with_a_capital(stt):
    transcript = stt.transcribe(pcm_of("command_time.wav"), deadline=time.time() + 30)
    assert transcript.text == "What time is it"


def test_threads_share_one_decoder_safely(stt):
    files = ["command_time.wav", "command_multiply.wav", "command_weather_paris.wav"]
    expected = {f: stt.recognize(pcm_of(f)).text for f in files}
    got: dict[str, list[str]] = {f: [] for f in files}

    def work(name: str) -> None:
        for _ in range(2):
            got[name].append(stt.recognize(pcm_of(name)).text)

    threads = [threading.Thread(target=work, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == {f: [expected[f]] * 2 for f in files}


# -- Piper -----------------------------------------------------------------------------------
def test_piper_speaks_16khz_pcm(tts):
    text = "It is twelve minutes past three in the afternoon."
    pieces = list(tts.stream(text, deadline=time.time() + 30))
    assert pieces and all(0 < len(p) <= PIECE_BYTES and len(p) % 2 == 0 for p in pieces)
    pcm = b"".join(pieces)
    seconds = len(pcm) / (2 * SAMPLE_RATE)
    assert 1.5 < seconds < 8, seconds  # about 2.5 s of speech for these 9 words
    assert rms(pcm) > 500


def test_piper_says_nothing_for_empty_text(tts):
    assert list(tts.stream("  ", deadline=time.time() + 30)) == []


def test_piper_stops_at_the_deadline(tts):
    with pytest.raises(ProviderError):
        list(tts.stream("Too late to say this.", deadline=time.time() - 1))


def test_piper_serves_threads_at_once(tts):
    out: list[bytes] = []

    def speak() -> None:
        out.append(
            b"".join(tts.stream("One sentence from each thread.", deadline=time.time() + 30))
        )

    threads = [threading.Thread(target=speak) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(out) == 3 and all(rms(pcm) > 500 and len(pcm) > SAMPLE_RATE for pcm in out)


def test_what_piper_says_pocketsphinx_hears(tts, stt):
    pcm = b"".join(tts.stream("Set a timer for ten minutes.", deadline=time.time() + 30))
    silence = b"\0\0" * (SAMPLE_RATE // 2)
    heard = stt.recognize(silence + pcm + silence)
    assert [(c.tool, c.arguments) for c in stt.matcher.match(heard.text)] == [
        ("set_timer", {"duration": "10 minutes"})
    ]


def test_a_missing_voice_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="VOXQUEUE_PIPER_VOICE"):
        PiperSynthesizer(
            Settings(providers=ProviderSettings(piper_voice=str(tmp_path / "nope.onnx")))
        )
