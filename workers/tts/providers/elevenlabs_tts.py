"""ElevenLabs streaming TTS through the official SDK, as 16 kHz PCM.

The SDK never retries ``stream``; we retry the opening of the stream (until the first chunk)
with backoff. A failure after audio went out is not retried: it would be heard twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from voxqueue.settings import Settings
from workers.runtime.retry import ProviderError, call_with_retry, retry_after_seconds

#: Bytes per chunk read from the stream (128 ms of audio): the SDK's default 1 KiB means
#: eight times as many Python iterations for the same sound.
CHUNK_BYTES = 4096


class ElevenLabsSynthesizer:
    name = "elevenlabs"

    def __init__(self, settings: Settings) -> None:
        from elevenlabs.client import ElevenLabs

        self.settings = settings
        self.client = ElevenLabs(
            api_key=settings.require_elevenlabs_key(),
            base_url=settings.elevenlabs_base_url or "https://api.elevenlabs.io",
            timeout=settings.provider_timeout_s,
        )

    def stream(self, text: str, *, deadline: float) -> Iterator[bytes]:
        s = self.settings

        def open_stream() -> tuple[bytes, Iterator[bytes]]:
            try:
                chunks = iter(self.client.text_to_speech.stream(
                    s.tts_voice, text=text, model_id=s.tts_model, output_format="pcm_16000",
                    request_options={"timeout_in_seconds": int(max(
                        1, min(s.provider_timeout_s, deadline - time.time()))),
                        "max_retries": 0, "chunk_size": CHUNK_BYTES},
                ))
                return next(chunks, b""), chunks
            except Exception as exc:
                raise _error(exc) from exc

        first, rest = call_with_retry(open_stream, attempts=s.provider_max_attempts,
                                      base_s=s.provider_backoff_s, cap_s=s.provider_backoff_max_s,
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
