"""The audio of one ``transcribe`` request: converted to 16 kHz mono 16-bit as it arrives,
and refused past the size the client API takes."""

from __future__ import annotations

from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart

from voxqueue.audio import SAMPLE_RATE


class AudioTooLarge(ValueError):
    """More audio than ``VOXQUEUE_MAX_AUDIO_BYTES``."""


class AudioIn:
    """Collects one utterance (``audio-start``, ``audio-chunk``…, ``audio-stop``)."""

    def __init__(self, start: AudioStart, max_bytes: int) -> None:
        self.format = (start.rate, start.width, start.channels)
        self.max_bytes = max_bytes
        self.converter = AudioChunkConverter(rate=SAMPLE_RATE, width=2, channels=1)
        self.pcm = bytearray()
        self.refused = False

    def add(self, chunk: AudioChunk) -> None:
        """Append a chunk (any rate, width and channels); raises :class:`AudioTooLarge` once
        the utterance is over the limit (what was collected is dropped)."""
        if self.refused:
            return
        self.pcm += self.converter.convert(chunk).audio
        if len(self.pcm) > self.max_bytes:
            self.refused = True
            self.pcm = bytearray()
            raise AudioTooLarge(f"the audio is over {self.max_bytes} bytes of 16 kHz speech "
                                "(VOXQUEUE_MAX_AUDIO_BYTES)")
