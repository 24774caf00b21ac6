"""Speech-to-text providers: a small protocol, one module per provider, chosen by settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from voxqueue.settings import Settings


@dataclass(frozen=True)
class Transcript:
    text: str
    ttfb_ms: float | None = None


class Transcriber(Protocol):
    """Turns 16 kHz mono int16 PCM into text."""

    name: str

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript: ...


def select_transcriber(settings: Settings) -> Transcriber:
    """The provider named by ``VOXQUEUE_STT`` (``auto``: OpenAI with a key, else offline)."""
    choice = settings.providers_in_use()["stt"]
    if choice == "openai":
        from workers.stt.providers.openai_stt import OpenAITranscriber

        return OpenAITranscriber(settings)
    if choice == "pocketsphinx":
        from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber

        return PocketsphinxTranscriber(settings)
    raise ValueError(f"unknown STT provider {settings.stt!r} (VOXQUEUE_STT): "
                     "use auto, openai or pocketsphinx")
