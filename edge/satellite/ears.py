"""The satellite's audio through the edge's listener: wake word, start and end of speech.

Audio arrives in any format and chunk size; it is converted to the edge's 10 ms frames of
16 kHz mono and fed to the same :class:`~edge.pipeline.Listener` the edge runs on a
microphone. A satellite with a wake word of its own starts a command at once (``asr`` stage);
one without streams all the time and the wake word is found here (``wake`` stage).
"""

from __future__ import annotations

from dataclasses import dataclass

from wyoming.audio import AudioChunk, AudioChunkConverter

from edge.capture import State
from edge.frames import FRAME_BYTES, RATE
from edge.pipeline import Event, Listener, NoSpeech, Utterance, Woke


@dataclass(frozen=True)
class SpeechStarted:
    """The command's speech began (Home Assistant's ``voice-started``)."""

    at: float


Heard = Event | SpeechStarted


class Ears:
    """Frames in, what was heard out; deaf until a pipeline runs."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.converter = AudioChunkConverter(rate=RATE, width=2, channels=1)
        self.pending = bytearray()
        self.listening = False
        self._speech_seen = False

    def wake_stage(self) -> None:
        """Listen for the wake word (a satellite that streams all the time)."""
        self.listener.capture.take()
        self.listening = True
        self._speech_seen = False

    def command_stage(self) -> None:
        """The satellite heard its wake word: capture the command now."""
        self.listener.capture.begin()
        self.listening = True
        self._speech_seen = False

    def deaf(self) -> None:
        """Ignore audio (a turn is being answered)."""
        self.listener.capture.take()
        self.listening = False
        self.pending.clear()

    def hear(self, chunk: AudioChunk) -> list[Heard]:
        """Feed one chunk; what it completed, in order."""
        if not self.listening:
            return []
        self.pending += self.converter.convert(chunk).audio
        heard: list[Heard] = []
        whole = len(self.pending) - len(self.pending) % FRAME_BYTES
        for at in range(0, whole, FRAME_BYTES):
            event = self.listener.feed(bytes(self.pending[at:at + FRAME_BYTES]))
            if isinstance(event, Woke):
                self._speech_seen = False
            if (not self._speech_seen and self.listener.capture.state is State.SPEECH):
                self._speech_seen = True
                heard.append(SpeechStarted(self.listener.now))
            if event is not None:
                heard.append(event)
                if isinstance(event, Utterance | NoSpeech):
                    self.listening = False
                    break
        del self.pending[:whole]
        if not self.listening:
            self.pending.clear()
        return heard
