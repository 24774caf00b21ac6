"""Offline speech to text with Whisper on the CPU (faster-whisper, CTranslate2, int8).

The model loads once per process (``whisper_model.model_source`` says from where). A command
arrives already endpointed by the edge, so there is no VAD pass; the language comes from the
settings, and the beam size from ``VOXQUEUE_WHISPER_BEAM_SIZE``. No hot words and no initial
prompt: the tools' example sentences given either way made commands worse here (bench:
``bench/offline_stt_accuracy.py``; the README has the numbers).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from voxqueue.settings import Settings
from workers.runtime.retry import ProviderError
from workers.stt.providers.base import Transcript
from workers.stt.providers.whisper_model import ModelError, model_source

#: A segment Whisper itself thinks is no speech at least this surely is dropped (it fills
#: silence with "you" or "Thank you." otherwise).
NO_SPEECH = 0.6
#: Peak level (of 1.0) below which the audio is taken as silence without decoding it.
SILENCE_PEAK = 0.003


class WhisperTranscriber:
    name = "whisper"

    def __init__(self, settings: Settings) -> None:
        from faster_whisper import WhisperModel

        self.settings = settings
        try:
            source = model_source(settings)
            self.model: Any = WhisperModel(source, device="cpu", compute_type="int8",
                                           cpu_threads=max(1, settings.whisper_threads),
                                           num_workers=1)
        except (ModelError, OSError, RuntimeError, ValueError) as exc:
            raise ValueError(f"the Whisper model {settings.whisper_model!r} could not be loaded "
                             f"(VOXQUEUE_WHISPER_MODEL): {exc}") from exc

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript:
        started = time.perf_counter()
        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        if not audio.size or float(np.max(np.abs(audio))) < SILENCE_PEAK:
            return Transcript(text="", ttfb_ms=(time.perf_counter() - started) * 1000)
        s = self.settings
        try:
            segments, _info = self.model.transcribe(
                audio, language=s.whisper_language or None, beam_size=max(1, s.whisper_beam_size),
                vad_filter=False, condition_on_previous_text=False, without_timestamps=True)
            text = " ".join(segment.text.strip() for segment in segments
                            if segment.no_speech_prob < NO_SPEECH).strip()
        except Exception as exc:  # CTranslate2 errors are not retryable: same input, same error
            raise ProviderError(f"Whisper failed: {exc.__class__.__name__}: {exc}",
                                retryable=False) from exc
        return Transcript(text=text, ttfb_ms=(time.perf_counter() - started) * 1000)
