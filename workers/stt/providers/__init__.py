"""Speech-to-text providers: the protocol in ``base``, one module per provider, chosen by
settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from voxqueue.settings import Settings
from workers.stt.providers.base import Transcriber

if TYPE_CHECKING:
    from workers.tool_registry.registry import ToolRegistry


def select_transcriber(settings: Settings, tools: Callable[[], ToolRegistry]) -> Transcriber:
    """The provider named by ``VOXQUEUE_STT`` (``auto``: OpenAI with a key, else Whisper when
    its model is installed, else pocketsphinx).

    ``tools``: the worker's tools, whose example sentences bias the offline recognizer.
    """
    choice = settings.providers.in_use()["stt"]
    if choice == "openai":
        from workers.stt.providers.openai_stt import OpenAITranscriber

        return OpenAITranscriber(settings)
    if choice == "pocketsphinx":
        from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber

        return PocketsphinxTranscriber(settings, tools())
    if choice == "whisper":
        from workers.stt.providers.whisper_stt import WhisperTranscriber

        return WhisperTranscriber(settings)
    raise ValueError(f"unknown STT provider {settings.providers.stt!r} (VOXQUEUE_STT): "
                     "use auto, openai, whisper or pocketsphinx")
