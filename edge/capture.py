"""Capturing one command: a pre-roll ring buffer and the capture state machine.

``idle → woke`` (the wake word, or a follow-up) ``→ speech`` (the VAD heard a command start)
``→ ended`` (trailing silence, the hard cap or the end of the input) or ``woke → timeout`` (no
speech came: nothing is sent).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import Enum

from edge.frames import FRAME_BYTES, FRAME_S
from edge.vad import Endpointer, Phase, Vad


class PreRoll:
    """The last few hundred milliseconds of audio, kept so the user need not pause after the
    wake word: a command that starts while the detector is still deciding is not cut."""

    def __init__(self, seconds: float) -> None:
        self._frames: deque[bytes] = deque(maxlen=max(1, round(seconds / FRAME_S)))
        self.enabled = seconds > 0

    def push(self, frame: bytes) -> None:
        self._frames.append(frame)

    def take(self) -> list[bytes]:
        frames = list(self._frames) if self.enabled else []
        self._frames.clear()
        return frames


class State(Enum):
    IDLE = "idle"
    WOKE = "woke"
    SPEECH = "speech"
    ENDED = "ended"
    TIMEOUT = "timeout"


class Capture:
    """Collects one command's audio and says when it is complete."""

    def __init__(
        self,
        vad: Vad,
        *,
        trailing_silence_s: float = 0.7,
        speech_start_s: float = 0.3,
        max_s: float = 15.0,
        no_speech_s: float = 4.0,
    ) -> None:
        self.vad = vad
        self.trailing_silence_s = trailing_silence_s
        self.speech_start_s = speech_start_s
        self.max_s = max_s
        self.no_speech_s = no_speech_s
        self.state = State.IDLE
        self.reason = ""
        """Why the capture ended: silence, max-length, end-of-input, no-speech, understood."""
        self.ended_silence_s = 0.0
        """The silence at the end of the command that ended last."""
        self._frames: list[bytes] = []
        self._elapsed = 0.0
        self._timeout = no_speech_s
        self._endpointer = Endpointer(trailing_silence_s, speech_start_s)

    @property
    def active(self) -> bool:
        return self.state in (State.WOKE, State.SPEECH)

    @property
    def frames(self) -> list[bytes]:
        """The frames captured so far (pre-roll first)."""
        return self._frames

    @property
    def silence_s(self) -> float:
        """The silence since the command's last speech (0 before it started)."""
        return self._endpointer.silence_s if self.state is State.SPEECH else 0.0

    def end_now(self, reason: str) -> State:
        """End a command under way before its trailing silence runs out (it was understood)."""
        if self.state is State.SPEECH:
            return self._end(State.ENDED, reason)
        return self.state

    def hold_for(self, trailing_silence_s: float | None) -> None:
        """The silence that ends the command under way: at least ``trailing_silence_s`` (the
        words so far stop mid-sentence), or the usual (None)."""
        wanted = max(self.trailing_silence_s, trailing_silence_s or 0.0)
        self._endpointer.trailing_silence_s = wanted

    def begin(self, preroll: Iterable[bytes] = (), *, no_speech_s: float | None = None) -> None:
        """Start listening for a command (again, when one was under way)."""
        self.vad.reset()
        self._endpointer = Endpointer(self.trailing_silence_s, self.speech_start_s)
        self._frames = list(preroll)
        self._elapsed = 0.0
        self._timeout = self.no_speech_s if no_speech_s is None else no_speech_s
        self.state = State.WOKE
        self.reason = ""

    def feed(self, frame: bytes) -> State:
        """One frame of the command; returns the new state."""
        if not self.active:
            return self.state
        self._frames.append(frame)
        self._elapsed += len(frame) / FRAME_BYTES * FRAME_S
        phase = self._endpointer.feed(self.vad.is_speech(frame))
        if phase is Phase.SPEAKING:
            self.state = State.SPEECH
        if phase is Phase.ENDED:
            return self._end(State.ENDED, "silence")
        if self._elapsed >= self.max_s - 1e-9:
            return self._end(
                State.ENDED if self.state is State.SPEECH else State.TIMEOUT,
                "max-length" if self.state is State.SPEECH else "no-speech",
            )
        if self.state is State.WOKE and self._elapsed >= self._timeout - 1e-9:
            return self._end(State.TIMEOUT, "no-speech")
        return self.state

    def end_of_input(self) -> State:
        """The input ended: a command under way is complete, a wake without speech is not."""
        if self.state is State.SPEECH:
            return self._end(State.ENDED, "end-of-input")
        if self.state is State.WOKE:
            return self._end(State.TIMEOUT, "no-speech")
        return self.state

    def take(self) -> bytes:
        """The captured audio; the capture is idle again."""
        pcm = b"".join(self._frames)
        self._frames = []
        self.state = State.IDLE
        return pcm

    def _end(self, state: State, reason: str) -> State:
        self.ended_silence_s = self.silence_s if state is State.ENDED else 0.0
        self.state = state
        self.reason = reason
        return state
