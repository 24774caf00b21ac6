"""Offline speech to text with pocketsphinx, biased towards the commands the tools declare.

pocketsphinx's general English model hears plain questions well but garbles commands ("set a
timer" -> "the timer", "twelve times thirteen" -> "the wall times per diem"). So each
utterance is first decoded with a small command language model, built at start from the
tools' example sentences (see ``workers.intents.corpus``) plus the most common English
words for free text. Its hypothesis is kept when it is a request the local intents
understand *and* it fits the sound about as well as an unconstrained phone loop does (a
sentence forced into command words fits much worse). Otherwise the general model decodes
the utterance: free speech is transcribed as well as pocketsphinx can.

Everything ships in the pocketsphinx wheel; nothing is downloaded. The decoder is built once
per process and is not thread-safe, so decoding runs under a lock (pocketsphinx holds the
GIL while it decodes: threads would not run in parallel anyway).
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from voxqueue.settings import Settings
from workers.intents import IntentMatcher, matcher_for
from workers.intents.corpus import END, START, command_lines
from workers.stt.providers.base import Transcript
from workers.stt.providers.pocketsphinx_hearing import (
    COMMANDS,
    PHONE_LM,
    PHONES,
    PocketsphinxHearing,
    Searches,
    best_hypothesis,
    build_searches,
    capitalized,
)

if TYPE_CHECKING:
    from workers.toolkit.registry import ToolRegistry

log = logging.getLogger(__name__)


#: How much worse per frame (in the decoder's log units) the command hypothesis may fit the
#: audio than a free phone loop and still be trusted. Commands measure about -1 to +11 on the
#: fixtures, speech forced into command words -7 to -12.
MIN_FIT = -4.0

#: Less speech than this (seconds, by pocketsphinx's voice activity detector) is no speech:
#: the decoders would otherwise "hear" a word in silence or noise.
MIN_SPEECH_S = 0.25

#: Common English words (by the general model's unigram probability) the command model also
#: knows, for free text such as "remember that {fact}".
GENERAL_WORDS = 5000


@dataclass(frozen=True)
class Recognition:
    """What the decoder heard, and why that text was chosen."""

    text: str
    source: str
    """``commands`` (the biased model), ``general``, or ``none`` (nothing heard)."""
    command_text: str = ""
    fit: float | None = None
    """Command hypothesis minus phone loop, per frame (higher fits better)."""


class PocketsphinxTranscriber:
    name = "pocketsphinx"
    min_fit = MIN_FIT
    min_speech_s = MIN_SPEECH_S

    def __init__(self, settings: Settings, registry: ToolRegistry) -> None:
        from pocketsphinx import Config, Decoder, get_model_path

        self.settings = settings
        self._lock = threading.Lock()
        self.decoder = Decoder(Config(samprate=settings.turns.sample_rate, loglevel="ERROR"))
        self.decoder.add_allphone_file(PHONES, get_model_path(PHONE_LM))
        self.matcher: IntentMatcher = matcher_for(registry)
        self.command_lm: Any = None
        self.biased = self._add_command_model()
        self._searches: Searches | None = None
        self._building = threading.Lock()

    # -- building ---------------------------------------------------------------------------
    def _add_command_model(self) -> bool:
        """Add the command language model as a search; False when no tool declares examples."""
        from pocketsphinx import NGramModel
        from pocketsphinx.lm import ArpaBoLM

        known = self._known_words
        lines = [
            line
            for line in command_lines(self.matcher)
            if all(w in known for w in line.split() if w not in (START, END))
        ]
        if not lines:
            return False
        arpa = ArpaBoLM(text="\n".join(lines), discount_mass=0.5)
        counted = sum(arpa.grams_1.values())
        for word, prob in self._common_words():
            arpa.grams_1[word] += max(1, round(counted * prob))
        arpa.compute()
        fd, path = tempfile.mkstemp(prefix="vq-commands-", suffix=".arpa")
        try:
            with os.fdopen(fd, "w") as out:
                arpa.write(out)
            lm = NGramModel(self.decoder.config, self.decoder.logmath, path)
        finally:
            os.unlink(path)
        self.decoder.add_lm(COMMANDS, lm)
        self.command_lm = lm
        log.info("pocketsphinx command model: %d lines, %d words", len(lines), len(arpa.grams_1))
        return True

    @cached_property
    def _known_words(self) -> set[str]:
        """The words of the pronunciation dictionary."""
        path = self.decoder.config["dict"]
        with open(path, encoding="utf-8") as f:
            return {line.split(maxsplit=1)[0].split("(")[0] for line in f if line.strip()}

    def _common_words(self) -> Iterable[tuple[str, float]]:
        """The general model's most probable single words and their probabilities."""
        lm = self.decoder.get_lm()
        logmath = self.decoder.logmath
        # One word per query: NGramModel.prob's buffer is sized for one pointer at most.
        ranked = sorted(
            ((lm.prob([w]), w) for w in self._known_words if w.isalpha() or "'" in w), reverse=True
        )
        return [(w, logmath.exp(p)) for p, w in ranked[:GENERAL_WORDS]]

    # -- decoding ---------------------------------------------------------------------------
    def hear(self, *, deadline: float = math.inf) -> PocketsphinxHearing | None:
        """Recognize a command while it is spoken (``pocketsphinx_hearing``); None while
        another command is being heard in this process."""
        if self.command_lm is None:
            return None
        with self._building:
            if self._searches is None:
                self._searches = build_searches(self)
        if not self._searches.lock.acquire(blocking=False):
            return None
        try:
            return PocketsphinxHearing(self, self._searches, deadline)
        except BaseException:
            self._searches.lock.release()
            raise

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript:
        started = time.perf_counter()
        heard = self.recognize(pcm)
        return Transcript(text=capitalized(heard.text),
                          ttfb_ms=round((time.perf_counter() - started) * 1000, 2))

    def recognize(self, pcm: bytes, *, biased: bool = True) -> Recognition:
        """Decode one utterance (``biased=False``: the general model only)."""
        if speech_seconds(pcm, self.settings.turns.sample_rate) < MIN_SPEECH_S:
            return Recognition("", "none")
        with self._lock:
            if biased and self.biased:
                command, fit = self._command_hypothesis(pcm)
                found = self.matcher.match(command, lenient=True) if command else []
                if found and fit >= MIN_FIT:
                    # Words before the request (a wake word, noise) are left out.
                    text = " ".join(command.split()[found[0].skipped :])
                    return Recognition(text, COMMANDS, command, fit)
            else:
                command, fit = "", None
            general, _ = self._decode(pcm, None)
            return Recognition(general, "general" if general else "none", command, fit)

    def _command_hypothesis(self, pcm: bytes) -> tuple[str, float]:
        text, score = self._decode(pcm, COMMANDS)
        if not text:
            return "", float("-inf")
        _, reference = self._decode(pcm, PHONES)
        frames = max(1, self.decoder.n_frames())
        return text, (score - reference) / frames

    def _decode(self, pcm: bytes, search: str | None) -> tuple[str, float]:
        """Text and log score (decoder units) of one pass with ``search`` (None: general)."""
        d = self.decoder
        d.activate_search(search)
        d.start_utt()
        d.process_raw(pcm, full_utt=True)
        d.end_utt()
        return best_hypothesis(d)


def speech_seconds(pcm: bytes, rate: int) -> float:
    """How much of the audio pocketsphinx's voice activity detector calls speech."""
    from pocketsphinx import Vad

    vad = Vad(Vad.LOOSE, rate)
    size = vad.frame_bytes
    frames = sum(vad.is_speech(pcm[i : i + size]) for i in range(0, len(pcm) - size + 1, size))
    return float(frames * vad.frame_length)
