"""OpenAI transcription through the official SDK: the whole command uploaded, or (a command
streamed while it is spoken, ``VOXQUEUE_OPENAI_STT_TRANSPORT=realtime``) sent as it is captured
on a Realtime transcription session (``openai_realtime``)."""

from __future__ import annotations

import logging
import math
import time

from voxqueue.audio import to_wav
from voxqueue.settings import Settings
from workers.runtime.openai_client import make_openai, provider_error
from workers.runtime.retry import call_with_retry
from workers.stt.providers.base import Transcript
from workers.stt.providers.openai_realtime import OpenAIRealtimeHearing

log = logging.getLogger(__name__)


class OpenAITranscriber:
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = make_openai(settings, "STT (OpenAI)")

    def hear(self, *, deadline: float = math.inf) -> OpenAIRealtimeHearing | None:
        """A Realtime session for a streamed command; None (upload at the end) when the
        transport is ``upload`` or the session cannot be opened."""
        if self.settings.providers.openai_stt_transport != "realtime":
            return None
        try:
            return OpenAIRealtimeHearing(self, deadline)
        except Exception as exc:  # refused, unreachable, the extra missing
            log.warning("stt: no Realtime session (%s: %s); the command will be uploaded",
                        exc.__class__.__name__, exc)
            return None

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript:
        wav = to_wav(pcm)
        s = self.settings

        def attempt() -> Transcript:
            started = time.perf_counter()
            try:
                answer = self.client.audio.transcriptions.create(
                    model=s.providers.stt_model, file=("utterance.wav", wav, "audio/wav"),
                    timeout=max(1.0, min(s.providers.timeout_s, deadline - time.time())),
                )
            except Exception as exc:  # the SDK's errors, mapped to retryable or not
                raise provider_error(exc, "OpenAI transcription") from exc
            text = answer if isinstance(answer, str) else answer.text
            return Transcript(text=text.strip(), ttfb_ms=(time.perf_counter() - started) * 1000)

        return call_with_retry(attempt, attempts=s.providers.max_attempts,
                               base_s=s.providers.backoff_s, cap_s=s.providers.backoff_max_s,
                               deadline=deadline)
