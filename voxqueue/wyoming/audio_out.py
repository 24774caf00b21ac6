"""Speech sent to a Wyoming peer: 16 kHz mono 16-bit PCM as ``audio-start``, ``audio-chunk``s
of at most 0.1 s (players and satellites expect small ones), ``audio-stop``."""

from __future__ import annotations

from collections.abc import Iterator

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event

from voxqueue.audio import SAMPLE_RATE

#: The largest ``audio-chunk`` sent: 0.1 s of speech.
CHUNK_BYTES = SAMPLE_RATE * 2 // 10


def start() -> Event:
    return AudioStart(rate=SAMPLE_RATE, width=2, channels=1).event()


def chunks(pcm: bytes, sent: int = 0) -> Iterator[Event]:
    """``audio-chunk`` events for ``pcm``; ``sent``: bytes already sent (their timestamps)."""
    for at in range(0, len(pcm), CHUNK_BYTES):
        yield AudioChunk(rate=SAMPLE_RATE, width=2, channels=1, audio=pcm[at:at + CHUNK_BYTES],
                         timestamp=ms(sent + at)).event()


def stop(sent: int = 0) -> Event:
    return AudioStop(timestamp=ms(sent)).event()


def ms(pcm_bytes: int) -> int:
    return pcm_bytes * 1000 // (SAMPLE_RATE * 2)
