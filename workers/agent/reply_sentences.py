"""Speaking while thinking: reply text is cut into sentences as it streams, and the sentences go
to the ``tts`` queue in pieces: the first at once, later ones gathered while the listener has
enough to hear. A reply ends where ``VOXQUEUE_REPLY_MAX_CHARS`` does, and each piece is counted
on its gateway device's characters budget."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from voxqueue.budgets import SPEAK_CHARS, charged_device, counters
from voxqueue.contracts import TtsJob
from voxqueue.spoken import MarkdownFilter
from voxqueue.spoken.sentences import (
    PAUSE_ENDS_SENTENCE_S,
    SentenceSplitter,
    cut_reply,
    ends_sentence,
)
from workers.agent.providers.base import StreamStopped
from workers.runtime import completion, handoff
from workers.runtime.batching import BLOCKED_READ_S, Arrival
from workers.runtime.stage import Stage

log = logging.getLogger(__name__)

#: How often a streaming answer checks for cancellation, barge-in and the deadline (seconds).
STOP_CHECK_S = 0.1
#: Speech per character at the quick end (about 20 characters a second): what the sentences
#: sent so far last at least.
SPEECH_S_PER_CHAR = 0.05
#: What a sentence sent now needs before its audio reaches the listener, with room to spare.
NEXT_AUDIO_S = 0.6
#: Later sentences are gathered into one piece while the listener has more than this in hand.
GATHER_WHILE_S = 1.0
#: The most text one gathered piece holds (characters; a single longer sentence goes alone).
MAX_PIECE_CHARS = 600


class Speaker:
    """Sends one step's reply text to the ``tts`` queue, a piece at a time.

    The first piece goes out as soon as it is cut, so speech starts at once. Each TTS job costs a
    request to the voice and a task (about a quarter of a turn's CPU each), so later sentences
    are gathered while the listener has more than ``GATHER_WHILE_S`` of audio in hand (its
    length at a quick speaking rate, since it was sent): a piece goes out when that runs low
    (checked at each token, and by a timer when the model is slow to send one), when it
    reaches ``MAX_PIECE_CHARS``, or when the reply ends. A piece is named by its step and first
    sentence, and the first attempt to name it fixes how many sentences it holds and records
    their words (``Keys.said``) before its job is sent, so a step run again sends the same
    pieces: its answer stored, the stored sentences; streamed again, the sentences an earlier
    attempt spoke start its answer (``resume``), whatever the model words differently now.

    Tokens that each wait for the network wake the worker once each. Once a piece is out and the
    listener has audio in hand for a while, a token that had to be waited for is followed by a
    pause of up to ``READ_PAUSE_S`` (``workers/runtime/batching.py``), and the tokens that pile
    up meanwhile are read at once: fewer wake-ups, and no sentence later than the listener
    needs it.

    The turn's reply (its steps' sentences together) has at most ``reply_max_chars``: the
    sentences are kept while they fit, then the one that does not fit is cut at its last
    sentence end that fits (or, while no sentence of the reply has ended, its last whole word)
    and nothing after it is kept: no sentence is sent that the recorded reply will not hold
    (``said``).
    """

    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def __init__(self, stage: Stage, step: int, reply_chars: int = 0) -> None:
        self.stage = stage
        self.step = step
        settings = stage.rt.settings
        self.before = reply_chars
        """Characters the turn's earlier steps spoke: the reply has that much less room."""
        self.cap = settings.turns.reply_max_chars
        self.capped = False
        """The reply is recorded as it is said: it reached the cap (the sentences cut so far
        are all of it), or the model's text is longer than its room."""
        self._full = False  # no sentence more fits
        self.chars = 0  # of the sentences, joined
        self._device = charged_device(stage.spec)
        self.splitter = SentenceSplitter(first_phrase_words=settings.agent.first_phrase_words)
        # Sentences are cut from the text as it will be said: markdown list items and headings
        # become sentences of their own; the reply itself (events, history) keeps its markup.
        self.markdown = MarkdownFilter() if settings.agent.speech_filter else None
        self.sentences: list[str] = []
        """Every sentence cut so far, in order: stored with the answer and ``pieces``, so that a
        step run again speaks the same pieces (a whole text is cut differently from a streamed
        one)."""
        self.pieces: list[tuple[int, int]] = []
        """Each piece sent: its first sentence and how many sentences it holds."""
        self.previous: str | None = None
        self.spoken_before = 0
        """How many sentences an earlier attempt of the step had put in pieces (``resume``)."""
        self._skip = 0  # sentences of the model's new answer still to drop for them
        self.streamed = False
        self.gather = settings.agent.gather_sentences and settings.agent.speak_while_thinking
        self._next = 0  # the first sentence in no piece yet
        self._lock = threading.Lock()
        self._timer: Callable[[], None] | None = None  # cancels the gathering's timer
        self._text_lock = threading.Lock()  # the splitter: fed here, ended by a pause's timer
        self._pause_timer: Callable[[], None] | None = None  # cancels the pause's timer
        self._pauses = 0  # pause timers armed: one that fired late knows it is not the last
        self._closed = False
        self._checked = self.clock()
        self._first_sent_at: float | None = None
        self._speech_s = 0.0  # the pieces sent, at a quick speaking rate
        self._returned_at: float | None = None
        self._arrival = Arrival()  # the model's pace, one per piece of text

    def on_text(self, delta: str) -> None:
        """Feed streamed text; whole sentences are sent or gathered. Raises ``StreamStopped``
        when the turn was cancelled or passed its deadline, which ends the model's stream."""
        self.streamed = True
        now = self.clock()
        waited = self._returned_at is not None and now - self._returned_at >= BLOCKED_READ_S
        self._arrival.read(1, now, waited)
        if now - self._checked >= STOP_CHECK_S:
            self._checked = now
            if self.stage.should_stop():
                raise StreamStopped(f"turn {self.stage.turn_id} stopped")
        with self._text_lock:
            if delta.strip():
                self._cancel_pause_timer()
            if not self._full:  # (past the cap the rest is not even cut)
                self._add(self._cut(delta))
                if delta.strip() and ends_sentence(delta) and self._holding() \
                        and not self._closed:
                    # "…is 156." may go on "…156.5": the next token decides, or a pause does.
                    self._pauses += 1
                    armed = self._pauses
                    self._pause_timer = self.stage.rt.timers.call_later(
                        PAUSE_ENDS_SENTENCE_S, lambda: self._on_pause(armed))
        # The sequential design holds every sentence until the reply is complete.
        if self.stage.rt.settings.agent.speak_while_thinking:
            self._hand_off()
        self._pause(waited)
        self._returned_at = self.clock()

    def _pause(self, waited: bool) -> None:
        """Let the model's next tokens pile up while the listener has enough to hear (after
        a read that ``waited``, or once what piled up is read)."""
        if self._first_sent_at is None:
            return
        slack = min(self._in_hand() - NEXT_AUDIO_S, self.stage.remaining() - 1)
        if pause := self._arrival.pause(waited, self.clock(), slack):
            self.sleep(pause)

    def resume(self) -> None:
        """Start with what an earlier attempt of this step put in pieces: its sentences, as
        recorded, begin this attempt's answer, the model's first as many sentences are dropped,
        and the pieces it had not sent yet are sent now. A first delivery has no earlier
        attempt: it is not asked (no round trip)."""
        stage = self.stage
        if stage.attempt <= 1 or not stage.spec.speak:
            return
        rt = stage.rt
        said = [s.decode() if isinstance(s, bytes) else str(s) for s in rt.redis.lrange(
            rt.keys.said(stage.turn_id, self.step), 0, -1)]
        if not said:
            return
        with self._lock:
            self._keep_all(said)
            self.spoken_before = self._skip = len(said)
        self._hand_off(final=True)
        # Spoken long ago, as far as the listener is concerned: what comes next goes at once.
        self._first_sent_at, self._speech_s = None, 0.0

    def said(self, text: str) -> str:
        """The answer's text: the model's ``text``, or, after ``resume`` found sentences spoken
        before or when the reply was cut, this answer's sentences (after ``resume``: those, then
        the model's text after as many of its own), so that the reply recorded is the reply
        heard."""
        return " ".join(self.sentences) if self.spoken_before or self.capped else text

    def finish(self, full_text: str) -> None:
        """The step's answer is complete: send what is left (all of it, if nothing streamed)."""
        self.cut_rest(full_text)
        self._hand_off(final=True)

    def cut_rest(self, full_text: str) -> None:
        """The step's answer is complete: cut what is left (all of it, if nothing streamed) and
        send nothing yet (``flush`` sends it, once the answer is stored)."""
        with self._text_lock:
            self._cancel_pause_timer()
        with self._lock:
            self._cancel_timer()
            # A text longer than the room (its markup, say) is recorded as it is said.
            self.capped = self.capped or len(full_text) > self.cap - self.before
        if not self.streamed and full_text:
            self._add(self._cut(full_text))
        if self.markdown is not None:
            self._add(self.splitter.feed(self.markdown.flush()))
        self._add(self.splitter.flush())

    def flush(self) -> None:
        """Send the sentences cut so far (the answer ends without its last words spoken)."""
        self._hand_off(final=True)

    def close(self) -> None:
        """The step is over: nothing more is sent (what was gathered and not sent is dropped:
        the turn was stopped or failed)."""
        with self._text_lock:
            self._cancel_pause_timer()
        with self._lock:
            self._closed = True
            self._cancel_timer()

    def resend(self, sentences: list[str]) -> None:
        """The pieces of a stored answer: each is sent unless an earlier attempt sent it (in
        the extent it was named with; those never named, gathered now)."""
        with self._lock:
            self._keep_all(sentences)
        self._hand_off(final=True)

    def _cut(self, text: str) -> list[str]:
        return self.splitter.feed(self.markdown.feed(text) if self.markdown else text)

    def _add(self, sentences: list[str]) -> None:
        with self._lock:
            for sentence in sentences:
                if not sentence.strip() or self._full:
                    continue
                if self._skip:  # in its place, the one an earlier attempt spoke
                    self._skip -= 1
                    continue
                self._fit(sentence)

    def _fit(self, sentence: str) -> None:
        """Keep the sentence, or what of it fits in the reply's room, and nothing after that."""
        gap = 1 if self.sentences else 0
        room = max(0, self.cap - self.before - self.chars - gap)
        # Whole words only while no sentence of the reply has ended yet (a first phrase has not).
        ended = self.before or any(ends_sentence(s) for s in self.sentences)
        kept = cut_reply(sentence, room, words=not ended)
        if kept:
            self.sentences.append(kept)
            self.chars += gap + len(kept)
        if kept != sentence:
            self.capped = self._full = True

    def _keep_all(self, sentences: list[str]) -> None:
        """These are the step's sentences (spoken before, or stored with its answer)."""
        self.sentences = list(sentences)
        self.chars = len(" ".join(self.sentences))

    def _in_hand(self) -> float:
        """What the listener has yet to hear, at least (0 before the first piece)."""
        if self._first_sent_at is None:
            return 0.0
        return self._first_sent_at + self._speech_s - self.clock()

    def _hand_off(self, *, final: bool = False, due: bool = False) -> None:
        """Send the sentences not in a piece yet, as pieces, unless they may be gathered a while
        longer (neither ``final``, the reply is complete, nor ``due``, the timer fired)."""
        with self._lock:
            if self._closed or not self.stage.spec.speak:
                return
            while (waiting := len(self.sentences) - self._next) > 0:
                gathering = self.gather and bool(self.pieces)  # never the first piece
                count = self._fits(waiting) if gathering else 1
                if (gathering and count == waiting and not (final or due)
                        and (spare := self._in_hand() - GATHER_WHILE_S) > 0):
                    # Due when the listener's audio runs low: a moment that moves only when a
                    # piece is sent, so one timer serves until then.
                    if self._timer is None:
                        # In the step's context, so the job it sends carries the step's trace.
                        self._timer = self.stage.rt.timers.call_later(spare, self._on_timer)
                    return
                self._cancel_timer()
                if not self._send_piece(count, final=final):
                    return

    def _fits(self, waiting: int) -> int:
        """How many of the waiting sentences one piece holds (at least one)."""
        chars = 0
        for n, sentence in enumerate(self.sentences[self._next:self._next + waiting]):
            chars += len(sentence) + 1
            if n and chars > MAX_PIECE_CHARS:
                return n
        return waiting

    def _on_timer(self) -> None:
        try:
            self._hand_off(due=True)
        except Exception:  # the step's own thread sends what is left when the reply ends
            log.warning("turn %s: a gathered piece could not be sent yet", self.stage.turn_id,
                        exc_info=True)

    def _on_pause(self, armed: int) -> None:
        """The model paused right after a sentence mark: that sentence is whole; sent now."""
        with self._text_lock:
            if self._pause_timer is None or armed != self._pauses:  # text came meanwhile
                return
            self._pause_timer = None
            released = self.markdown.release() if self.markdown is not None else ""
            self._add(self.splitter.feed(released) + self.splitter.end_at_pause())
        try:
            if self.stage.rt.settings.agent.speak_while_thinking:
                self._hand_off()
        except Exception:  # the step's own thread sends what is left when the reply ends
            log.warning("turn %s: a sentence ended by a pause could not be sent yet",
                        self.stage.turn_id, exc_info=True)

    def _holding(self) -> bool:
        """Whether text is held back from the sentences (by the splitter or the filter)."""
        return self.splitter.holding() or (self.markdown is not None and self.markdown.holding())

    def _cancel_pause_timer(self) -> None:
        if self._pause_timer is not None:
            self._pause_timer()
            self._pause_timer = None

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer()
            self._timer = None

    def _send_piece(self, count: int, *, final: bool) -> bool:
        """Send the next ``count`` sentences as one TTS job, or as many as an earlier attempt put
        in the piece that starts there; False when that is more than are cut yet."""
        stage, rt = self.stage, self.stage.rt
        start = self._next
        # Charged to the device (if the piece is new) in the same step, once.
        charge = None if self._device is None else (
            counters(rt.keys, self._device, SPEAK_CHARS, time.time()),
            len(" ".join(self.sentences[start:start + count])))
        # Named and its words recorded in one step, before its job can be sent: a crash leaves
        # no sentence sent and unrecorded; a later attempt speaks on from these words.
        piece = completion.allocate(
            rt, stage.turn_id, f"{self.step}:{start}", count, fence=stage.fence, charge=charge,
            said=(rt.keys.said(stage.turn_id, self.step), self.sentences[start:start + count]))
        count = piece.sentences
        if count > len(self.sentences) - start:
            if not final:
                return False  # an earlier attempt gathered more: wait for them
            count = len(self.sentences) - start  # the text differs now: what there is
        text = " ".join(self.sentences[start:start + count])
        previous, self.previous = self.previous, text
        if self._first_sent_at is None:
            self._first_sent_at = self.clock()
        self._speech_s += len(text) * SPEECH_S_PER_CHAR
        if not piece.sent:
            handoff.send(stage.rt, TtsJob(turn_id=stage.turn_id, seq=piece.seq, text=text,
                                          previous_text=previous, enqueued_at=time.time()))
            completion.mark_sent(stage.rt, stage.turn_id, piece.seq)
        self._next = start + count
        self.pieces.append((start, count))
        if len(self.pieces) == 1 and not piece.sent:
            stage.crash_point("agent.mid-stream")
        return True
