"""The audio of one ``transcribe`` request: converted to 16 kHz mono 16-bit as it arrives and
passed on at once (to the turn's speech stream, which the STT job reads meanwhile), refused past
the size the client API takes."""

from __future__ import annotations

from typing import Protocol

from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart

from voxqueue.audio import SAMPLE_RATE


class AudioTooLarge(ValueError):
    """More audio than ``VOXQUEUE_MAX_AUDIO_BYTES``."""


class Sink(Protocol):
    """Where the converted audio goes (``voxqueue.client.direct.SpeechStream``)."""

    def write(self, pcm: bytes) -> None: ...


class AudioIn:
    """One utterance (``audio-start``, ``audio-chunk``…, ``audio-stop``)."""

    def __init__(self, start: AudioStart, max_bytes: int, sink: Sink) -> None:
        self.format = (start.rate, start.width, start.channels)
        self.max_bytes = max_bytes
        self.sink = sink
        self.converter = AudioChunkConverter(rate=SAMPLE_RATE, width=2, channels=1)
        self.size = 0

    def add(self, chunk: AudioChunk) -> None:
        """Convert a chunk (any rate, width and channels) and pass it on; raises
        :class:`AudioTooLarge` once the utterance is over the limit."""
        pcm = self.converter.convert(chunk).audio
        self.size += len(pcm)
        if self.size > self.max_bytes:
            raise AudioTooLarge(f"the audio is over {self.max_bytes} bytes of 16 kHz speech "
                                "(VOXQUEUE_MAX_AUDIO_BYTES)")
        self.sink.write(pcm)
