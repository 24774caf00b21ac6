"""Whisper offline: the packaged base model assembled once and checked, the recognizer on the
fixtures, and ``auto`` choosing it only when its model is here."""

from __future__ import annotations

import hashlib
import multiprocessing
import time
import wave
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import SPEECH
from voxqueue.observability.doctor import stt_check
from voxqueue.settings import ProviderSettings, Settings, whisper_installed
from workers.stt.providers.whisper_model import BASE_FILES, ModelError, assemble_base, model_source

whisper_here = pytest.mark.skipif(
    not whisper_installed(ProviderSettings()),
    reason='Whisper not installed (pip install "voxqueue[whisper]")')


def settings(**providers: Any) -> Settings:
    return Settings(providers=ProviderSettings(**providers))


def fake_parts(tmp_path: Path, body: bytes) -> list[Path]:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    for name in BASE_FILES:
        (one / name).write_text("{}")
    (one / "model.bin.part1").write_bytes(body[:5])
    (two / "model.bin.part2").write_bytes(body[5:])
    return [one, two]


def test_a_damaged_model_is_refused_and_nothing_is_left_behind(tmp_path):
    parts = fake_parts(tmp_path, b"not the whisper model")
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match="damaged"):
        assemble_base(parts, cache)
    assert list(cache.iterdir()) == []  # no half-made model for the next start to trust


def test_the_model_checked_once_is_taken_as_is_after(tmp_path, monkeypatch):
    body = b"a model of twenty-odd bytes"
    monkeypatch.setattr("workers.stt.providers.whisper_model.BASE_SHA256",
                        hashlib.sha256(body).hexdigest())
    parts = fake_parts(tmp_path, body)
    made = assemble_base(parts, tmp_path / "cache")
    assert (made / "model.bin").read_bytes() == body
    (parts[1] / "model.bin.part2").unlink()  # the packages are not read again
    assert assemble_base(parts, tmp_path / "cache") == made


def _assemble(cache: str) -> str:
    return model_source(settings(whisper_cache=cache))


@whisper_here
def test_processes_starting_together_assemble_one_good_model(tmp_path):
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        made = set(pool.map(_assemble, [str(tmp_path)] * 2))
    (path,) = made
    digest = hashlib.sha256((Path(path) / "model.bin").read_bytes()).hexdigest()
    assert digest == "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(path).name]


def pcm(name: str) -> bytes:
    with wave.open(str(SPEECH / name), "rb") as w:
        return w.readframes(w.getnframes())


@pytest.fixture(scope="module")
def whisper():
    from workers.stt.providers.whisper_stt import WhisperTranscriber

    return WhisperTranscriber(settings())


@whisper_here
def test_whisper_hears_a_command_and_free_speech_exactly(whisper):
    said = whisper.transcribe(pcm("command_multiply.wav"), deadline=time.time() + 60).text
    assert said == "What is 12 times 13?"
    free = whisper.transcribe(pcm("speech_without_wake_word.wav"), deadline=time.time() + 60)
    assert "bought some apples, bread and cheese" in free.text


@whisper_here
def test_silence_and_noise_give_no_words(whisper):
    for name in ("silence_5s.wav", "noise_10s.wav"):
        assert whisper.transcribe(pcm(name), deadline=time.time() + 60).text == "", name
    assert whisper.transcribe(b"", deadline=time.time() + 60).text == ""


@whisper_here
def test_auto_picks_whisper_only_when_its_model_is_here(tmp_path):
    assert settings().providers.in_use()["stt"] == "whisper"
    assert settings(whisper_model=str(tmp_path)).providers.in_use()["stt"] == "whisper"
    elsewhere = settings(whisper_model="small")  # would be downloaded: not for auto
    assert elsewhere.providers.in_use()["stt"] == "pocketsphinx"
    assert settings(openai_api_key="sk-x").providers.in_use()["stt"] == "openai"
    assert settings(stt="pocketsphinx").providers.in_use()["stt"] == "pocketsphinx"


@whisper_here
def test_doctor_says_which_recognizer_runs_and_why():
    chosen = stt_check(settings())
    assert chosen.ok and chosen.detail.startswith("whisper, the packaged base model (auto")
    fallback = stt_check(settings(whisper_model="small"))
    assert fallback.ok and fallback.warning
    assert fallback.detail == "pocketsphinx (auto: no OpenAI key, no Whisper model 'small' here)"
    assert "voxqueue[whisper]" in fallback.fix
    cloud = stt_check(settings(openai_api_key="sk-x"))
    assert cloud.detail.startswith("openai, ") and "key set" in cloud.detail


def segment(text: str = "What is 12 times 13?", compression: float = 1.2, logprob: float = -0.2,
            no_speech: float = 0.05) -> SimpleNamespace:
    return SimpleNamespace(text=text, compression_ratio=compression, avg_logprob=logprob,
                           no_speech_prob=no_speech)


def test_a_short_window_answer_is_kept_only_when_whisper_is_sure_of_it():
    from workers.stt.providers.whisper_stt import sure

    assert sure([segment()])
    assert not sure([segment("Flip the coin. " * 20, compression=9.5)])  # a decoding loop
    assert not sure([segment(logprob=-0.9)])  # words it guessed
    assert not sure([])  # nothing heard: the full window decides
    assert not sure([segment(no_speech=0.9)])
    assert not sure([segment(), segment(compression=2.2)])  # one unsure segment is enough


@pytest.fixture
def encoded(whisper, monkeypatch) -> list[int]:
    """The encoder's window (in mel frames) at each call, as the model really ran it."""
    windows: list[int] = []
    encode = whisper.model.encode

    def spy(features):
        out = encode(features)
        windows.append(out.shape[1] * 2)  # the encoder halves the frames
        return out

    monkeypatch.setattr(whisper.model, "encode", spy)
    return windows


def test_the_first_window_fits_the_speech_in_whole_seconds_then_the_short_window():
    from workers.stt.providers.whisper_stt import window_frames

    assert window_frames(4.17, 15.0, fit=True) == [700, 1500]  # 4.17 s and 2 s, up to 7 s
    assert window_frames(3.0, 15.0, fit=True) == [500, 1500]  # already whole: no second more
    assert window_frames(0.4, 15.0, fit=True) == [300, 1500]
    assert window_frames(6.0, 15.0, fit=True) == [800, 1500]
    assert window_frames(6.1, 15.0, fit=True) == [1500]  # longer than a command: short window
    assert window_frames(13.0, 15.0, fit=True) == [1500]
    assert window_frames(13.1, 15.0, fit=True) == []  # too long for the short window: 30 s
    assert window_frames(4.17, 15.0, fit=False) == [1500]  # not fitted: the short window
    assert window_frames(4.17, 0.0, fit=True) == []  # no short window: 30 s only
    assert window_frames(3.5, 5.5, fit=True) == [550]  # fitted: no shorter than the short one


def test_an_answer_said_twice_is_not_sure():
    from workers.stt.providers.whisper_stt import repeated, sure

    assert repeated("What's the time? What's the time?")  # a short sentence, twice
    assert repeated("convert 10 miles to kilometers convert 10 miles to kilometers")
    assert not repeated("What's the time?")
    assert not repeated("Set a timer for 5 minutes and a timer for 10 minutes.")
    assert not repeated("Is it raining? Is it cold?")
    assert not sure([segment("Set a timer for 30 seconds. Set a timer for 30 seconds.")])
    assert not sure([segment("What's the time?"), segment("What's the time?")])


@whisper_here
def test_a_short_command_is_heard_once_in_a_window_fitted_to_it(whisper, encoded):
    said = whisper.transcribe(pcm("command_multiply.wav"), deadline=time.time() + 60).text
    assert said == "What is 12 times 13?"
    assert encoded == [700]  # 4.17 s of speech and 2 s, up to whole seconds


@whisper_here
def test_the_window_fitted_to_the_speech_can_be_turned_off():
    from workers.stt.providers.whisper_stt import WhisperTranscriber

    fixed = WhisperTranscriber(settings(whisper_fit_window=False))
    windows: list[int] = []
    encode = fixed.model.encode

    def spy(features):
        out = encode(features)
        windows.append(out.shape[1] * 2)  # as the model ran it (the encoder halves the frames)
        return out

    fixed.model.encode = spy
    assert fixed.transcribe(pcm("command_multiply.wav"),
                            deadline=time.time() + 60).text == "What is 12 times 13?"
    assert windows == [1500]


@whisper_here
def test_an_answer_said_twice_in_the_fitted_window_is_decoded_again_in_the_short_one(
        whisper, encoded):
    said = whisper.transcribe(pcm("heldout/the_time_quiet.wav"), deadline=time.time() + 60)
    assert encoded == [500, 1500]  # 2.1 s of speech: "What's the time? What's the time?"
    assert said.text == "What's the time?"


@whisper_here
def test_an_unsure_short_window_answer_is_decoded_again_in_the_full_window(whisper, encoded):
    said = whisper.transcribe(pcm("heldout/coin_reverberant.wav"), deadline=time.time() + 60)
    assert encoded == [500, 1500, 3000]  # 2.3 s of speech: fitted, short, both looped
    assert said.text.lower().count("flip") == 1


@whisper_here
def test_speech_longer_than_the_short_window_gets_the_full_window(whisper, encoded):
    said = whisper.transcribe(pcm("long_question.wav"), deadline=time.time() + 60).text
    assert said.endswith("pack an umbrella the evening before I leave?")
    assert set(encoded) == {3000}


@whisper_here
def test_the_short_window_can_be_turned_off():
    from workers.stt.providers.whisper_stt import WhisperTranscriber

    whole = WhisperTranscriber(settings(whisper_short_window_s=0))
    windows: list[int] = []
    encode = whole.model.encode

    def spy(features):
        windows.append(features.shape[-1])
        return encode(features)

    whole.model.encode = spy
    assert whole.transcribe(pcm("command_multiply.wav"),
                            deadline=time.time() + 60).text == "What is 12 times 13?"
    assert windows == [3000]
