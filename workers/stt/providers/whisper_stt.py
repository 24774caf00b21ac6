"""Offline speech to text with Whisper on the CPU (faster-whisper, CTranslate2, int8).

The model loads once per process (``whisper_model.model_source`` says from where). A command
arrives already endpointed by the edge, so there is no VAD pass; the language comes from the
settings, and the beam size from ``VOXQUEUE_WHISPER_BEAM_SIZE``. No hot words and no initial
prompt: the tools' example sentences given either way made commands worse here (bench:
``bench/offline_stt_accuracy.py``; docs/benchmarks.md has the numbers).

Whisper's encoder always sees a 30 s window, so a 3 s command costs what 30 s of speech costs.
A short command is first decoded in a shorter window, greedy in temperature: for a command up
to 6 s, the speech and two seconds of padding, rounded up to whole seconds
(``VOXQUEUE_WHISPER_FIT_WINDOW``), then the short window (``VOXQUEUE_WHISPER_SHORT_WINDOW_S``);
an answer that is not sure there (its own compression ratio and average log probability, the
signals Whisper uses for its fallback; or a sentence said twice) goes on to the next window,
the last being the full one.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterable
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
#: Mel frames per second of audio (Whisper's 10 ms hop).
FRAMES_PER_S = 100
#: Speech this much shorter than the short window fits in it with room to spare.
WINDOW_MARGIN_S = 2.0
#: Padding after the speech in a window fitted to it (Whisper was trained on padded windows).
FIT_MARGIN_S = 2.0
#: Only a command this short gets a fitted window (every recorded command is under 6 s; a 7 s
#: sentence in the echo room lost a word in one).
FIT_UP_TO_S = 6.0
#: This many words said again, in the same order, is a repetition, not speech.
REPEAT_WORDS = 4
#: A short-window answer is kept when every segment repeats itself less than this (gzip
#: compression ratio; Whisper's own fallback threshold is 2.4)...
SURE_COMPRESSION = 2.0
#: ...and its tokens' average log probability is above this (Whisper's fallback: -1.0).
SURE_LOGPROB = -0.5


def sure(segments: Iterable[Any]) -> bool:
    """Whether a short-window answer can be kept: some words, none repeated in a loop, all
    decoded with confidence, and no sentence said twice (a window fitted closely to the speech
    makes Whisper say it again)."""
    said = [s for s in segments if s.no_speech_prob < NO_SPEECH and s.text.strip()]
    return bool(said) and all(s.compression_ratio < SURE_COMPRESSION
                              and s.avg_logprob > SURE_LOGPROB for s in said) \
        and not repeated(" ".join(s.text for s in said))


def repeated(text: str) -> bool:
    """Whether ``text`` says something twice: a sentence ("What's the time? What's the time?"),
    or a run of ``REPEAT_WORDS`` words ("convert 10 miles convert 10 miles")."""
    sentences = [" ".join(re.findall(r"[\w%']+", part.lower()))
                 for part in re.split(r"[.?!]+", text)]
    sentences = [x for x in sentences if x]
    said = re.findall(r"[\w%']+", text.lower())
    runs = [tuple(said[i:i + REPEAT_WORDS]) for i in range(len(said) - REPEAT_WORDS + 1)]
    return len(set(sentences)) < len(sentences) or len(set(runs)) < len(runs)


def window_frames(audio_s: float, short_window_s: float, fit: bool) -> list[int]:
    """The encoder's windows (mel frames) to try, in turn, before the full 30 s, for
    ``audio_s`` of speech: one fitted to a command (``fit``: the speech and ``FIT_MARGIN_S``,
    up to whole seconds), then the short window; none when the speech is too long for that."""
    if short_window_s <= 0 or audio_s > short_window_s - WINDOW_MARGIN_S:
        return []
    short = int(short_window_s * FRAMES_PER_S)
    fitted = math.ceil(audio_s + FIT_MARGIN_S) * FRAMES_PER_S
    return [fitted, short] if fit and audio_s <= FIT_UP_TO_S and fitted < short else [short]


def _windowed_model(source: str, threads: int) -> Any:
    """A faster-whisper model whose encoder can be given a window shorter than 30 s."""
    from faster_whisper import WhisperModel

    class WindowedWhisper(WhisperModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.window = threading.local()  # frames for this thread's current decode

        def encode(self, features: np.ndarray) -> Any:
            frames = getattr(self.window, "frames", None)
            if frames:  # the audio fits; the rest of the 30 s is padding
                features = features[..., :frames]
            return super().encode(features)

    return WindowedWhisper(source, device="cpu", compute_type="int8", cpu_threads=threads,
                           num_workers=1)


class WhisperTranscriber:
    name = "whisper"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        try:
            self.model: Any = _windowed_model(model_source(settings),
                                              max(1, settings.providers.whisper_threads))
        except (ModelError, OSError, RuntimeError, ValueError) as exc:
            raise ValueError(f"the Whisper model {settings.providers.whisper_model!r} could not be "
                             f"loaded (VOXQUEUE_WHISPER_MODEL): {exc}") from exc

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript:
        started = time.perf_counter()
        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        if not audio.size or float(np.max(np.abs(audio))) < SILENCE_PEAK:
            return Transcript(text="", ttfb_ms=(time.perf_counter() - started) * 1000)
        p = self.settings.providers
        windows = window_frames(audio.size / 16000, p.whisper_short_window_s,
                                p.whisper_fit_window)
        try:
            segments: list[Any] | None = None
            for frames in windows:
                segments = self._decode(audio, frames, temperature=[0.0])
                if sure(segments):
                    break
                segments = None
            if segments is None:
                segments = self._decode(audio, None)
        except Exception as exc:  # CTranslate2 errors are not retryable: same input, same error
            raise ProviderError(f"Whisper failed: {exc.__class__.__name__}: {exc}",
                                retryable=False) from exc
        text = " ".join(s.text.strip() for s in segments if s.no_speech_prob < NO_SPEECH).strip()
        return Transcript(text=text, ttfb_ms=(time.perf_counter() - started) * 1000)

    def _decode(self, audio: np.ndarray, frames: int | None, **options: Any) -> list[Any]:
        """Every segment of ``audio``, the encoder seeing ``frames`` (None: the full 30 s)."""
        s = self.settings
        self.model.window.frames = frames
        try:
            found, _info = self.model.transcribe(
                audio, language=s.providers.whisper_language or None,
                beam_size=max(1, s.providers.whisper_beam_size),
                vad_filter=False, condition_on_previous_text=False, without_timestamps=True,
                **options)
            return list(found)  # decoding happens here, while the window is set
        finally:
            self.model.window.frames = None
