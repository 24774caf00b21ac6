"""The optional openWakeWord engine hears the wake phrases of the fixtures, and nothing else."""

from __future__ import annotations

import pytest

from edge.frames import FRAME_BYTES
from edge.wake import WakeWords
from tests.conftest import SPEECH
from voxqueue.audio import read_wav

pytest.importorskip("pyopen_wakeword")


def detections(names: list[str], fixture: str) -> list[str]:
    pcm = read_wav((SPEECH / fixture).read_bytes(), max_bytes=10**8, max_seconds=120).data
    wake = WakeWords(names, engine="openwakeword")
    found = []
    try:
        for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
            hit = wake.process(pcm[i:i + FRAME_BYTES])
            if hit is not None:
                found.append(hit.name)
    finally:
        wake.close()
    return found


@pytest.mark.parametrize(("fixture", "expected"), [
    ("hey_jarvis_time_tokyo.wav", ["hey_jarvis"]),
    ("okay_nabu_timer.wav", ["okay_nabu"]),
    ("edge_two_turns.wav", ["hey_jarvis", "okay_nabu"]),
    ("speech_without_wake_word.wav", []),
    ("noise_10s.wav", []),
])
def test_openwakeword_engine(fixture, expected):
    assert detections(["okay_nabu", "hey_jarvis"], fixture) == expected
