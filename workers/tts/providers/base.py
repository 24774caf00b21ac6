"""What every text-to-speech provider speaks: the ``Synthesizer`` protocol."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from voxqueue.spoken import Reading


class Synthesizer(Protocol):
    """Speaks text as 16 kHz mono int16 PCM, chunk by chunk as it is produced."""

    name: str
    reading: Reading
    """What the engine reads right by itself: digits (ElevenLabs) or only words (Piper)."""
    arrives_by_itself: bool
    """True for a network stream (ElevenLabs): the audio comes whether it is read or not, so
    a read may wait for several pieces. False where reading drives the synthesis (Piper)."""

    def stream(self, text: str, *, deadline: float,
               previous_text: str | None = None) -> Iterator[bytes]:
        """``previous_text``: what was said just before, for continuous prosody (if supported)."""
        ...
