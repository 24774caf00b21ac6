"""What every speech-to-text provider speaks: the ``Transcriber`` protocol and its result, and
``LiveTranscriber``/``Hearing`` for engines that recognize speech while it arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Transcript:
    text: str
    ttfb_ms: float | None = None


class Transcriber(Protocol):
    """Turns 16 kHz mono int16 PCM into text."""

    name: str

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript: ...


class Hearing(Protocol):
    """One utterance recognized as it arrives."""

    def feed(self, pcm: bytes) -> None:
        """More audio (decoded now, so that little is left for the end)."""

    def pause(self) -> None:
        """The speaker paused here (an engine that transcribes segments may close one)."""

    def partial(self) -> Transcript:
        """The words so far, without ending the utterance (cheap and never waiting: call it at
        every pause, and again while it lasts, as an engine's words may arrive later)."""

    def finish(self) -> Transcript:
        """The utterance ended: its transcript. It may be called at a pause that looks like the
        end; audio fed afterwards continues the utterance (the engine hears it all again)."""

    def close(self) -> None:
        """Release the engine (after ``finish``, or to drop the utterance)."""


@runtime_checkable
class LiveTranscriber(Protocol):
    """A transcriber that can also recognize speech while it is spoken."""

    def hear(self, *, deadline: float = ...) -> Hearing | None:
        """A new utterance (to be recognized by ``deadline``, epoch seconds), or None when the
        engine is busy with another (then transcribe the whole audio instead)."""
