"""Text-to-speech providers: the protocol in ``base``, one module per provider, chosen by
settings."""

from __future__ import annotations

from voxqueue.settings import Settings
from workers.tts.providers.base import Synthesizer


def select_synthesizer(settings: Settings) -> Synthesizer:
    """The provider named by ``VOXQUEUE_TTS`` (``auto``: ElevenLabs with a key, else Piper)."""
    choice = settings.providers.in_use()["tts"]
    if choice == "elevenlabs":
        from workers.tts.providers.elevenlabs_tts import ElevenLabsSynthesizer

        return ElevenLabsSynthesizer(settings)
    if choice == "piper":
        from workers.tts.providers.piper_tts import PiperSynthesizer

        return PiperSynthesizer(settings)
    raise ValueError(f"unknown TTS provider {settings.providers.tts!r} (VOXQUEUE_TTS): "
                     "use auto, elevenlabs or piper")
