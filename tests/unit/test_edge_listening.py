"""The edge's ears: wake words, voice activity, endpointing and capture, on real recordings."""

from __future__ import annotations

import wave
from typing import Any

import pytest

from edge.capture import Capture, PreRoll, State
from edge.frames import FRAME_BYTES, SILENT_FRAME, frames_of
from edge.pipeline import Listener, NoSpeech, Utterance, Woke
from edge.settings import EdgeSettings
from edge.vad import Endpointer, Phase, make_vad
from edge.wake import WakeWords
from tests.conftest import SPEECH

ALL_WORDS = ["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"]


def pcm_of(name: str) -> bytes:
    with wave.open(str(SPEECH / name)) as w:
        return w.readframes(w.getnframes())


def listen(pcm: bytes, **settings: Any) -> list[Woke | Utterance | NoSpeech]:
    config = EdgeSettings(_env_file=None, **{"wake_words": ALL_WORDS, **settings})  # type: ignore[call-arg]
    listener = Listener.from_settings(config)
    found = [e for frame in frames_of(pcm) if (e := listener.feed(frame)) is not None]
    last = listener.end_of_input()
    return found + ([last] if last is not None else [])


@pytest.mark.parametrize("vad", ["webrtc", "micro"])
def test_the_two_turn_stream_gives_two_wakes_and_two_commands(vad):
    got = listen(pcm_of("edge_two_turns.wav"), vad=vad)
    assert [type(e).__name__ for e in got] == ["Woke", "Utterance", "Woke", "Utterance"]
    woke1, said1, woke2, said2 = got
    assert isinstance(woke1, Woke) and woke1.detection.name == "hey_jarvis"
    assert isinstance(woke2, Woke) and woke2.detection.name == "okay_nabu"
    assert isinstance(said1, Utterance) and isinstance(said2, Utterance)
    assert said1.reason == said2.reason == "silence"
    assert said1.wake == woke1.detection
    # Each command ends soon after its speech, long before the next wake word.
    assert said1.at < woke2.detection.at - 3
    for said in (said1, said2):
        assert 1.5 < len(said.pcm) / 32000 < 5.0


@pytest.mark.parametrize(
    "name",
    [
        "speech_without_wake_word.wav",
        "noise_10s.wav",
        "silence_5s.wav",
        "command_time.wav",
        "long_question.wav",
    ],
)
def test_nothing_wakes_the_device_but_a_wake_word(name):
    assert listen(pcm_of(name)) == []


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("hey_jarvis_time_tokyo.wav", "hey_jarvis"),
        ("okay_nabu_timer.wav", "okay_nabu"),
        ("alexa_multiply.wav", "alexa"),
    ],
)
def test_each_wake_word_is_heard_by_its_own_model(name, model):
    got = listen(pcm_of(name))
    assert isinstance(got[0], Woke) and got[0].detection.name == model
    assert isinstance(got[1], Utterance)


def test_only_the_chosen_wake_words_are_heard():
    assert listen(pcm_of("alexa_multiply.wav"), wake_words=["hey_jarvis"]) == []


def test_a_wake_word_with_nothing_after_it_times_out():
    pcm = pcm_of("hey_jarvis_time_tokyo.wav")[: 32000 * 2] + bytes(32000 * 6)
    got = listen(pcm, no_speech_s=3.0)
    assert [type(e) for e in got] == [Woke, NoSpeech]
    assert isinstance(got[1], NoSpeech) and not got[1].follow_up
    assert got[1].at == pytest.approx(got[0].detection.at + 3.0, abs=0.05)  # type: ignore[union-attr]


def test_the_input_ending_mid_command_still_sends_it():
    pcm = pcm_of("hey_jarvis_time_tokyo.wav")[: int(3.5 * 32000)]  # cut inside "... Tokyo"
    got = listen(pcm)
    assert isinstance(got[-1], Utterance) and got[-1].reason == "end-of-input"


def test_the_cooldown_stops_one_utterance_waking_twice():
    pcm = pcm_of("hey_jarvis_time_tokyo.wav")
    jarvis_twice = pcm[: int(2.0 * 32000)] + pcm[int(1.0 * 32000) : int(2.0 * 32000)]
    wake = WakeWords(["hey_jarvis"], cooldown_s=2.0)
    hits = [d for f in frames_of(jarvis_twice + bytes(32000)) if (d := wake.process(f))]
    assert len(hits) == 1
    wake = WakeWords(["hey_jarvis"], cooldown_s=0.0)
    hits = [d for f in frames_of(jarvis_twice + bytes(32000)) if (d := wake.process(f))]
    assert len(hits) == 2


def test_preroll_keeps_audio_from_just_before_the_wake_word():
    pre = PreRoll(0.2)
    frames = [bytes([n]) * FRAME_BYTES for n in range(50)]
    for f in frames:
        pre.push(f)
    assert pre.take() == frames[-20:]
    assert pre.take() == []
    assert PreRoll(0).take() == []


class Scripted:
    """A VAD that says what it is told (the capture logic without a model)."""

    def __init__(self, decisions: str) -> None:
        self.decisions = iter(decisions)

    def is_speech(self, frame: bytes) -> bool:
        return next(self.decisions) == "1"

    def reset(self) -> None:
        return None


def run_capture(decisions: str, **kw: float) -> tuple[State, str, int]:
    capture = Capture(Scripted(decisions), **kw)
    capture.begin([SILENT_FRAME] * 5)
    state = State.WOKE
    for _ in decisions:
        state = capture.feed(SILENT_FRAME)
        if not capture.active:
            break
    reason = capture.reason
    return state, reason, len(capture.take()) // FRAME_BYTES


def test_capture_ends_after_the_trailing_silence_of_each_preset():
    speech = "1" * 100
    for preset, seconds in (("relaxed", 1.25), ("default", 0.7), ("aggressive", 0.25)):
        s = EdgeSettings(_env_file=None, silence=preset)  # type: ignore[call-arg]
        assert s.trailing_silence_s == seconds
        state, reason, n = run_capture(speech + "0" * 200, trailing_silence_s=seconds)
        assert (state, reason) == (State.ENDED, "silence")
        assert n == 5 + 100 + round(seconds * 100)  # pre-roll + speech + trailing silence


def test_capture_has_a_hard_cap_and_a_no_speech_timeout():
    state, reason, n = run_capture("1" * 2000, max_s=15.0)
    assert (state, reason, n) == (State.ENDED, "max-length", 5 + 1500)
    state, reason, n = run_capture("0" * 1000, no_speech_s=4.0)
    assert (state, reason) == (State.TIMEOUT, "no-speech")
    # Short bursts (a click, a cough) do not start a command.
    state, reason, _ = run_capture(("11" + "0" * 40) * 20, no_speech_s=4.0)
    assert (state, reason) == (State.TIMEOUT, "no-speech")


def test_endpointer_ignores_blips_in_a_pause_but_not_real_speech():
    ep = Endpointer(trailing_silence_s=0.7)
    for _ in range(30):
        ep.feed(True)
    assert ep.phase is Phase.SPEAKING
    for decision in "0" * 50 + "11" + "0" * 19:  # 0.5 s, a 20 ms blip, 0.19 s: 0.69 s in all
        ep.feed(decision == "1")
    assert ep.phase is Phase.SPEAKING
    assert ep.feed(False) is Phase.ENDED
    ep = Endpointer(trailing_silence_s=0.7)
    for decision in "1" * 30 + "0" * 50 + "1" * 20 + "0" * 60:  # a word after a pause
        ep.feed(decision == "1")
    assert ep.phase is Phase.SPEAKING


def test_follow_up_listens_without_a_wake_word():
    config = EdgeSettings(_env_file=None, wake_words=["hey_jarvis"])  # type: ignore[call-arg]
    listener = Listener.from_settings(config)
    listener.follow_up(3.0)
    command = pcm_of("command_time.wav")
    events = [e for f in frames_of(command) if (e := listener.feed(f)) is not None]
    assert len(events) == 1 and isinstance(events[0], Utterance) and events[0].wake is None
    listener.follow_up(2.0)
    events = [e for f in frames_of(bytes(32000 * 3)) if (e := listener.feed(f)) is not None]
    assert len(events) == 1 and isinstance(events[0], NoSpeech) and events[0].follow_up


def test_a_wake_word_during_a_capture_starts_it_over():
    config = EdgeSettings(_env_file=None, wake_words=["okay_nabu"])  # type: ignore[call-arg]
    listener = Listener.from_settings(config)
    listener.follow_up(4.0)  # listening already (as after a question)...
    got = [e for f in frames_of(pcm_of("okay_nabu_timer.wav")) if (e := listener.feed(f))]
    woke = [e for e in got if isinstance(e, Woke)]
    said = [e for e in got if isinstance(e, Utterance)]
    assert len(woke) == 1 and len(said) == 1  # ...the wake word restarts it: one command
    assert said[0].wake is not None and said[0].wake.name == "okay_nabu"


@pytest.mark.parametrize("kind", ["webrtc", "micro"])
def test_both_vads_tell_speech_from_silence(kind):
    vad = make_vad(kind)
    speech = pcm_of("command_time.wav")
    decisions = [vad.is_speech(f) for f in frames_of(speech)]
    assert sum(decisions) > 60  # "What time is it?": most of a second of speech
    vad.reset()
    assert not any(vad.is_speech(f) for f in frames_of(bytes(32000)))


def test_a_command_heard_to_stop_mid_sentence_waits_longer_then_the_usual_again():
    capture = Capture(Scripted("1" * 100 + "0" * 300), trailing_silence_s=0.7)
    capture.begin()
    for _ in range(100):
        capture.feed(SILENT_FRAME)
    capture.hold_for(1.2)  # the words so far: "set a timer for"
    states = [capture.feed(SILENT_FRAME) for _ in range(119)]
    assert State.ENDED not in states and capture.silence_s == pytest.approx(1.19)
    assert capture.feed(SILENT_FRAME) is State.ENDED
    capture = Capture(Scripted("1" * 100 + "0" * 300), trailing_silence_s=0.7)
    capture.begin()
    for _ in range(100):
        capture.feed(SILENT_FRAME)
    capture.hold_for(1.2)
    capture.hold_for(None)  # the speaker went on: the usual silence ends the command
    assert [capture.feed(SILENT_FRAME) for _ in range(70)][-1] is State.ENDED
    capture.begin()
    capture.hold_for(0.3)  # never shorter than the usual
    assert capture._endpointer.trailing_silence_s == 0.7
