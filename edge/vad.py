"""Voice activity: a speech/silence decision per 10 ms frame, and the endpointing rules.

Two detectors ship in wheels: webrtcvad (a GMM, ~0.0001 of a core) and pymicro-vad (a small
neural net, ~0.013 of a core, steadier in noise but about half a second late at the end of
speech). :class:`Endpointer` turns the decisions into "a command started" and "it ended",
Home Assistant's way: 0.3 s of speech starts it, trailing silence (relaxed 1.25 s, default
0.7 s, aggressive 0.25 s) ends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from edge.frames import FRAME_S, RATE


class Vad(Protocol):
    def is_speech(self, frame: bytes) -> bool: ...

    def reset(self) -> None: ...


class WebrtcVad:
    """webrtcvad on 10 ms frames; ``aggressiveness`` 0 (lenient) to 3 (strict)."""

    def __init__(self, aggressiveness: int = 2) -> None:
        import webrtcvad

        self.aggressiveness = aggressiveness
        self._vad = webrtcvad.Vad(aggressiveness)

    def is_speech(self, frame: bytes) -> bool:
        return bool(self._vad.is_speech(frame, RATE))

    def reset(self) -> None:
        return None


class MicroVad:
    """pymicro-vad's probability against ``threshold``."""

    def __init__(self, threshold: float = 0.5) -> None:
        from pymicro_vad import MicroVad as _MicroVad

        self.threshold = threshold
        self._factory = _MicroVad
        self._vad = _MicroVad()

    def is_speech(self, frame: bytes) -> bool:
        return float(self._vad.process_10ms(frame)) >= self.threshold

    def reset(self) -> None:
        self._vad = self._factory()


def make_vad(kind: str, *, aggressiveness: int = 2, threshold: float = 0.5) -> Vad:
    if kind == "webrtc":
        return WebrtcVad(aggressiveness)
    if kind == "micro":
        return MicroVad(threshold)
    raise ValueError(f"unknown VAD {kind!r}: use webrtc or micro")


class Phase(Enum):
    WAITING = "waiting"
    """No command yet (only short bursts so far)."""
    SPEAKING = "speaking"
    ENDED = "ended"
    """Trailing silence after a command: it is complete."""


@dataclass
class Endpointer:
    """Decides, frame by frame, when a command starts and when it has ended."""

    trailing_silence_s: float = 0.7
    speech_start_s: float = 0.3
    """Speech (within bursts no further apart than ``reset_s``) that starts a command."""
    reset_s: float = 0.3
    """Silence before a command that forgets earlier bursts."""
    blip_s: float = 0.1
    """Speech inside a command shorter than this (a click, a breath) does not end a pause."""

    def __post_init__(self) -> None:
        self.phase = Phase.WAITING
        self._speech = 0.0
        self._silence = 0.0
        self._talk = 0.0

    @property
    def silence_s(self) -> float:
        """The silence since the last speech of a command under way."""
        return self._silence if self.phase is not Phase.WAITING else 0.0

    def feed(self, speech: bool, frame_s: float = FRAME_S) -> Phase:
        if self.phase is Phase.WAITING:
            if speech:
                self._silence = 0.0
                self._speech += frame_s
                if self._speech >= self.speech_start_s - 1e-9:
                    self.phase = Phase.SPEAKING
                    self._silence = self._talk = 0.0
            else:
                self._silence += frame_s
                if self._silence >= self.reset_s:
                    self._speech = 0.0
        elif self.phase is Phase.SPEAKING:
            if speech:
                self._talk += frame_s
                if self._talk >= self.blip_s - 1e-9:
                    self._silence = 0.0
            else:
                self._talk = 0.0
                self._silence += frame_s
                if self._silence >= self.trailing_silence_s - 1e-9:
                    self.phase = Phase.ENDED
        return self.phase
