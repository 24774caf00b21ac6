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

Recognizing a command while it is spoken (:class:`PocketsphinxHearing`).

The batch transcriber decodes a finished utterance in up to three passes:
the command model, a phone loop to check its fit, and the general model when no command fits.
Here the first two have a decoder each, fed every frame as it arrives, so when a command ends
only their final rescoring is left (~60-110 ms for a four-second command, against ~500 ms for
the passes over the whole audio). At a pause their current best path is the partial transcript,
at no cost. When the speech is not a command the tools know, the whole utterance is decoded at
its end as before: free speech gains nothing, and a command the live decoders missed is still
found by the batch passes.

The decoders are built once per process, at the first streamed command, and serve one command at
a time: a second command streamed at the same moment (a threads pool) is decoded whole at its
end instead. Without a command model (no tool declares example sentences) there is nothing to
hear live: ``hear`` is not offered.
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

if TYPE_CHECKING:
    from workers.tool_registry.registry import ToolRegistry


#: The searches' names, and the phone loop's model (shipped in the pocketsphinx wheel).
COMMANDS, PHONES = "commands", "phones"

PHONE_LM = "en-us/en-us-phone.lm.bin"

#: Partial paths fit worse than final ones (no rescoring yet: about 3 units per frame on the
#: fixtures), so a partial command is trusted down to this much below the final threshold.
PARTIAL_MIN_FIT_MARGIN = 2.0


@dataclass
class Searches:
    """The command model's and the phone loop's decoders, fed the same audio."""

    commands: Any
    phones: Any
    lock: threading.Lock


def build_searches(owner: PocketsphinxTranscriber) -> Searches:
    from pocketsphinx import Config, Decoder, get_model_path

    def decoder() -> Any:
        return Decoder(Config(samprate=owner.settings.turns.sample_rate, loglevel="ERROR"))

    commands = decoder()
    commands.add_lm(COMMANDS, owner.command_lm)
    commands.activate_search(COMMANDS)
    phones = decoder()
    phones.add_allphone_file(PHONES, get_model_path(PHONE_LM))
    phones.activate_search(PHONES)
    return Searches(commands, phones, threading.Lock())


class PocketsphinxHearing:
    """One utterance through the per-process searches (holds their lock until closed)."""

    def __init__(self, owner: PocketsphinxTranscriber, searches: Searches,
                 deadline: float) -> None:
        from pocketsphinx import Vad

        self.owner = owner
        self.searches = searches
        self.deadline = deadline
        self.audio = bytearray()
        self.speech_s = 0.0  # by pocketsphinx's voice activity detector, as the batch path
        self._vad = Vad(Vad.LOOSE, owner.settings.turns.sample_rate)
        self._closed = False
        self._open: list[Any] = []  # decoders in an utterance
        self._decoders = [searches.commands, searches.phones]
        for d in self._decoders:
            d.start_utt()
            self._open.append(d)

    def feed(self, pcm: bytes) -> None:
        if not pcm:
            return
        size = self._vad.frame_bytes
        counted = len(self.audio) - len(self.audio) % size  # whole frames already counted
        self.audio += pcm
        for at in range(counted, len(self.audio) - size + 1, size):
            if self._vad.is_speech(bytes(self.audio[at:at + size])):
                self.speech_s += self._vad.frame_length
        for d in self._decoders:
            if d not in self._open:  # finished at a pause, and the speaker went on
                d.start_utt()
                self._open.append(d)
                d.process_raw(bytes(self.audio[:-len(pcm)]))
            d.process_raw(pcm)

    def pause(self) -> None:
        """Nothing to do: the words so far are always at hand."""

    def partial(self) -> Transcript:
        started = time.perf_counter()
        return Transcript(text=capitalized(self._command(final=False)),
                          ttfb_ms=round((time.perf_counter() - started) * 1000, 2))

    def finish(self) -> Transcript:
        started = time.perf_counter()
        for d in self._decoders:
            self._end(d)
        text = self._command(final=True)
        if not text and self.speech_s >= self.owner.min_speech_s:  # not a command: as before
            return self.owner.transcribe(bytes(self.audio), deadline=self.deadline)
        return Transcript(text=capitalized(text),
                          ttfb_ms=round((time.perf_counter() - started) * 1000, 2))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for d in list(self._open):
                self._end(d)
        finally:
            self.searches.lock.release()

    def _end(self, decoder: Any) -> None:
        if decoder in self._open:
            self._open.remove(decoder)
            decoder.end_utt()

    def _command(self, *, final: bool) -> str:
        """The command model's words when they are a request the intents know and fit the
        sound about as well as the phone loop (the batch transcriber's test), else ""."""
        owner, s = self.owner, self.searches
        if self.speech_s < owner.min_speech_s:
            return ""
        command, score = best_hypothesis(s.commands)
        _, reference = best_hypothesis(s.phones)
        fit = (score - reference) / max(1, s.commands.n_frames())
        found = owner.matcher.match(command, lenient=True) if command else []
        floor = owner.min_fit - (0 if final else PARTIAL_MIN_FIT_MARGIN)
        if found and fit >= floor:
            return " ".join(command.split()[found[0].skipped:])  # words before it left out
        return ""


def best_hypothesis(decoder: Any) -> tuple[str, float]:
    """A decoder's best path so far: its words (fillers and noise left out) and log score."""
    hyp: Any = decoder.hyp()
    if hyp is None:
        return "", float("-inf")
    score = decoder.logmath.log(hyp.score) if hyp.score > 0 else float("-inf")
    words = [w for w in hyp.hypstr.split() if not w.startswith(("<", "[", "+"))]
    return " ".join(words), float(score)


def capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


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
        """Recognize a command while it is spoken (``PocketsphinxHearing``); None while
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
