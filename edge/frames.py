"""The edge's audio unit: 10 ms frames of 16 kHz mono 16-bit PCM (160 samples, 320 bytes)."""

from __future__ import annotations

from collections.abc import Iterator

RATE = 16000
SAMPLE_BYTES = 2
FRAME_SAMPLES = 160
FRAME_BYTES = FRAME_SAMPLES * SAMPLE_BYTES
FRAME_S = FRAME_SAMPLES / RATE
SILENT_FRAME = bytes(FRAME_BYTES)


def seconds(pcm: bytes) -> float:
    """Duration of 16 kHz mono 16-bit PCM."""
    return len(pcm) / (RATE * SAMPLE_BYTES)


def frames_of(pcm: bytes) -> Iterator[bytes]:
    """Split PCM into whole frames; a short last frame is padded with silence."""
    for start in range(0, len(pcm), FRAME_BYTES):
        frame = pcm[start : start + FRAME_BYTES]
        if len(frame) < FRAME_BYTES:
            frame = frame + bytes(FRAME_BYTES - len(frame))
        yield frame
