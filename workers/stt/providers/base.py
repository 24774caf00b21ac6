"""What every speech-to-text provider speaks: the ``Transcriber`` protocol and its result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Transcript:
    text: str
    ttfb_ms: float | None = None


class Transcriber(Protocol):
    """Turns 16 kHz mono int16 PCM into text."""

    name: str

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript: ...
