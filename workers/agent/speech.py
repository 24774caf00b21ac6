"""Speaking while thinking: reply text is cut into sentences as it streams, and each sentence
becomes a TTS job at once."""

from __future__ import annotations

import time

from voxqueue.contracts import TtsJob
from voxqueue.sentences import SentenceSplitter
from voxqueue.spoken import MarkdownFilter
from workers.agent.providers.base import StreamStopped
from workers.runtime import completion, handoff
from workers.runtime.batching import BLOCKED_READ_S, batch_pause
from workers.runtime.stage import Stage

#: How often a streaming answer checks for cancellation, barge-in and the deadline (seconds).
STOP_CHECK_S = 0.1
#: Speech per character at the quick end (about 20 characters a second): what the sentences
#: sent so far last at least.
SPEECH_S_PER_CHAR = 0.05
#: What a sentence sent now needs before its audio reaches the listener, with room to spare.
NEXT_AUDIO_S = 0.6


class Speaker:
    """Sends one step's reply text to the ``tts`` queue sentence by sentence.

    Tokens that each wait for the network wake the worker once each. Once a sentence is out
    and the listener has audio in hand for a while (its length at a quick speaking rate, since
    it was sent), a token that had to be waited for is followed by a pause of up to
    ``READ_PAUSE_S`` (``workers/runtime/batching.py``), and the tokens that pile up meanwhile
    are read at once: fewer wake-ups, and no sentence later than the listener needs it.
    """

    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def __init__(self, stage: Stage, step: int) -> None:
        self.stage = stage
        self.step = step
        self.splitter = SentenceSplitter(
            first_phrase_words=stage.rt.settings.first_phrase_words)
        # Sentences are cut from the text as it will be said: markdown list items and headings
        # become sentences of their own; the reply itself (events, history) keeps its markup.
        self.markdown = MarkdownFilter() if stage.rt.settings.speech_filter else None
        self.sentences: list[str] = []
        """Every piece cut so far, in order: stored with the answer, so that a step run again
        speaks the same pieces (a whole text is cut differently from a streamed one)."""
        self.previous: str | None = None
        self.streamed = False
        self._held: list[str] = []
        self._checked = self.clock()
        self._first_sent_at: float | None = None
        self._speech_s = 0.0  # the sentences sent, at a quick speaking rate
        self._returned_at: float | None = None

    def on_text(self, delta: str) -> None:
        """Feed streamed text; whole sentences are sent at once. Raises ``StreamStopped`` when
        the turn was cancelled or passed its deadline, which ends the model's stream."""
        self.streamed = True
        now = self.clock()
        waited = self._returned_at is not None and now - self._returned_at >= BLOCKED_READ_S
        if now - self._checked >= STOP_CHECK_S:
            self._checked = now
            if self.stage.should_stop():
                raise StreamStopped(f"turn {self.stage.turn_id} stopped")
        sentences = self._cut(delta)
        if self.stage.rt.settings.speak_while_thinking:
            for sentence in sentences:
                self.say(sentence)
        else:  # the sequential design: hold every sentence until the reply is complete
            self._held.extend(sentences)
        if waited:
            self._pause()
        self._returned_at = self.clock()

    def _pause(self) -> None:
        """Let the model's next tokens pile up while the listener has enough to hear."""
        if self._first_sent_at is None:
            return
        in_hand = self._first_sent_at + self._speech_s - self.clock()
        if pause := batch_pause(min(in_hand - NEXT_AUDIO_S, self.stage.remaining() - 1)):
            self.sleep(pause)

    def finish(self, full_text: str) -> None:
        """The step's answer is complete: send what is left (all of it, if nothing streamed)."""
        if not self.streamed and full_text:
            self._held.extend(self._cut(full_text))
        if self.markdown is not None:
            self._held.extend(self.splitter.feed(self.markdown.flush()))
        for sentence in [*self._held, *self.splitter.flush()]:
            self.say(sentence)
        self._held.clear()

    def _cut(self, text: str) -> list[str]:
        return self.splitter.feed(self.markdown.feed(text) if self.markdown else text)

    def resend(self, sentences: list[str]) -> None:
        """The pieces of a stored answer: each is sent unless an earlier attempt sent it."""
        for sentence in sentences:
            self.say(sentence)

    def say(self, sentence: str) -> None:
        stage = self.stage
        if not stage.spec.speak or not sentence.strip():
            return
        name = f"{self.step}:{len(self.sentences)}"
        self.sentences.append(sentence)
        seq, _new, sent = completion.allocate(stage.rt, stage.turn_id, name)
        previous, self.previous = self.previous, sentence
        if self._first_sent_at is None:
            self._first_sent_at = self.clock()
        self._speech_s += len(sentence) * SPEECH_S_PER_CHAR
        if not sent:
            handoff.send(stage.rt, TtsJob(turn_id=stage.turn_id, seq=seq, text=sentence,
                              previous_text=previous, enqueued_at=time.time()))
            completion.mark_sent(stage.rt, stage.turn_id, seq)
            if len(self.sentences) == 1:
                stage.crash_point("agent.mid-stream")
