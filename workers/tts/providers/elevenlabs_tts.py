"""ElevenLabs streaming TTS through the official SDK, as 16 kHz PCM.

The SDK never retries ``stream``; we retry the opening of the stream (until the first chunk)
with backoff. A failure after audio went out is not retried: it would be heard twice.
Audio is taken as it arrives (``chunk_size`` None; the SDK's default would hold it back until
1 KiB is there); ``workers.tts.chunking`` sizes what goes on the turn stream.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from voxqueue.settings import Settings
from voxqueue.spoken import Reading
from workers.runtime.retry import ProviderError, call_with_retry, retry_after_seconds


class ElevenLabsSynthesizer:
    name = "elevenlabs"
    reading = Reading.DIGITS
    arrives_by_itself = True

    def __init__(self, settings: Settings) -> None:
        from elevenlabs.client import ElevenLabs

        self.settings = settings
        self.client = ElevenLabs(
            api_key=settings.providers.require_elevenlabs_key(),
            base_url=settings.providers.elevenlabs_base_url or "https://api.elevenlabs.io",
            timeout=settings.providers.timeout_s,
        )

    def stream(self, text: str, *, deadline: float,
               previous_text: str | None = None) -> Iterator[bytes]:
        s = self.settings

        def open_stream() -> tuple[bytes, Iterator[bytes]]:
            timeout = int(max(1, min(s.providers.timeout_s, deadline - time.time())))
            # chunk_size None: each piece as it arrives (the type says int; httpx takes None).
            options: Any = {"timeout_in_seconds": timeout, "max_retries": 0, "chunk_size": None}
            try:
                chunks = iter(self.client.text_to_speech.stream(
                    s.providers.tts_voice, text=text, model_id=s.providers.tts_model,
                    output_format="pcm_16000",
                    previous_text=previous_text, request_options=options))
                return next(chunks, b""), chunks
            except Exception as exc:
                raise _error(exc) from exc

        first, rest = call_with_retry(open_stream, attempts=s.providers.max_attempts,
                                      base_s=s.providers.backoff_s, cap_s=s.providers.backoff_max_s,
                                      deadline=deadline)
        if first:
            yield first
        try:
            yield from rest
        except Exception as exc:
            raise ProviderError(f"ElevenLabs stream broke: {exc.__class__.__name__}") from exc


def _error(exc: Exception) -> ProviderError:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        headers = getattr(exc, "headers", None) or {}
        return ProviderError(f"ElevenLabs answered HTTP {status}", status=status,
                             retryable=status in (408, 409, 429) or status >= 500,
                             retry_after=retry_after_seconds(headers))
    transport = isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "httpx", "httpcore", "h11")
    return ProviderError(f"ElevenLabs failed: {exc.__class__.__name__}", retryable=transport)
