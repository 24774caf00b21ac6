"""pocketsphinx recognizing a command while it is spoken.

The batch transcriber (``pocketsphinx_stt``) decodes a finished utterance in up to three passes:
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

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workers.stt.providers.base import Transcript

if TYPE_CHECKING:
    from workers.stt.providers.pocketsphinx_stt import PocketsphinxTranscriber

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
