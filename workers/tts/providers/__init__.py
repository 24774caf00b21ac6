"""Text-to-speech providers: a small protocol, one module per provider, chosen by settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from voxqueue.settings import Settings


class Synthesizer(Protocol):
    """Speaks text as 16 kHz mono int16 PCM, chunk by chunk as it is produced."""

    name: str

    def stream(self, text: str, *, deadline: float,
               previous_text: str | None = None) -> Iterator[bytes]:
        """``previous_text``: what was said just before, for continuous prosody (if supported)."""
        ...


def select_synthesizer(settings: Settings) -> Synthesizer:
    """The provider named by ``VOXQUEUE_TTS`` (``auto``: ElevenLabs with a key, else Piper)."""
    choice = settings.providers_in_use()["tts"]
    if choice == "elevenlabs":
        from workers.tts.providers.elevenlabs_tts import ElevenLabsSynthesizer

        return ElevenLabsSynthesizer(settings)
    if choice == "piper":
        from workers.tts.providers.piper_tts import PiperSynthesizer

        return PiperSynthesizer(settings)
    raise ValueError(f"unknown TTS provider {settings.tts!r} (VOXQUEUE_TTS): "
                     "use auto, elevenlabs or piper")
