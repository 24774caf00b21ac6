"""The device's ears: frames in, wake words and complete commands out.

Wake word, pre-roll and capture run here frame by frame, with no I/O and no threads, in audio
time, so the microphone, a file and the footprint benchmark all run this same code.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.capture import Capture, PreRoll, State
from edge.frames import FRAME_BYTES, FRAME_S
from edge.settings import EdgeSettings
from edge.vad import make_vad
from edge.wake import Detection, WakeWords


@dataclass(frozen=True)
class Woke:
    detection: Detection
    restarted: bool
    """A command was already being captured: it is dropped and capture starts over."""


@dataclass(frozen=True)
class Utterance:
    pcm: bytes
    at: float
    """Audio time of the end of speech."""
    reason: str
    wake: Detection | None
    """None for a follow-up (no wake word)."""
    silence_s: float = 0.0
    """The trailing silence at the end of ``pcm``."""


@dataclass(frozen=True)
class NoSpeech:
    at: float
    follow_up: bool


Event = Woke | Utterance | NoSpeech


class Listener:
    """Wake word → capture → utterance, one 10 ms frame at a time."""

    def __init__(self, wake: WakeWords, capture: Capture, preroll: PreRoll) -> None:
        self.wake = wake
        self.capture = capture
        self.preroll = preroll
        self.now = 0.0
        self._wake: Detection | None = None

    @classmethod
    def from_settings(cls, s: EdgeSettings) -> Listener:
        wake = WakeWords(s.wake_words, cutoff=s.wake_cutoff, cooldown_s=s.cooldown_s,
                         engine=s.wake_engine)
        vad = make_vad(s.vad, aggressiveness=s.vad_aggressiveness, threshold=s.vad_threshold)
        capture = Capture(
            vad,
            trailing_silence_s=s.trailing_silence_s,
            speech_start_s=s.speech_start_s,
            max_s=s.max_seconds,
            no_speech_s=s.no_speech_s,
        )
        return cls(wake, capture, PreRoll(s.preroll_s))

    @property
    def capturing(self) -> bool:
        return self.capture.active

    def feed(self, frame: bytes) -> Event | None:
        """Process one frame; at most one event comes of it."""
        self.now += len(frame) / FRAME_BYTES * FRAME_S
        self.preroll.push(frame)
        detection = self.wake.process(frame)
        if detection is not None:
            restarted = self.capture.active
            self.capture.begin(self.preroll.take())
            self._wake = detection
            return Woke(detection, restarted)
        if not self.capture.active:
            return None
        return self._settle(self.capture.feed(frame))

    def follow_up(self, seconds: float) -> None:
        """Listen for a command without the wake word (after a reply that asked something)."""
        if not self.capture.active:
            self.capture.begin(no_speech_s=seconds)
            self._wake = None

    def end_now(self, reason: str) -> Event | None:
        """End the command under way now (the server understood it); its utterance."""
        return self._settle(self.capture.end_now(reason))

    def end_of_input(self) -> Event | None:
        return self._settle(self.capture.end_of_input())

    def _settle(self, state: State) -> Event | None:
        if state is State.ENDED:
            return Utterance(self.capture.take(), self.now, self.capture.reason, self._wake,
                             self.capture.ended_silence_s)
        if state is State.TIMEOUT:
            self.capture.take()
            return NoSpeech(self.now, follow_up=self._wake is None)
        return None
