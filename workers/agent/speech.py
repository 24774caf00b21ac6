"""Speaking while thinking: reply text is cut into sentences as it streams, and each sentence
becomes a TTS job at once."""

from __future__ import annotations

import time

from voxqueue.contracts import TtsJob
from workers.agent.sentences import SentenceSplitter
from workers.runtime.stage import Stage
from workers.tts import progress


class Speaker:
    """Sends one step's reply text to the ``tts`` queue sentence by sentence."""

    def __init__(self, stage: Stage, step: int) -> None:
        self.stage = stage
        self.step = step
        self.splitter = SentenceSplitter(
            first_phrase_words=stage.rt.settings.first_phrase_words)
        self.count = 0
        self.previous: str | None = None
        self.streamed = False
        self._held: list[str] = []

    def on_text(self, delta: str) -> None:
        """Feed streamed text; whole sentences are sent at once."""
        self.streamed = True
        sentences = self.splitter.feed(delta)
        if self.stage.rt.settings.speak_while_thinking:
            for sentence in sentences:
                self.say(sentence)
        else:  # the sequential design: hold every sentence until the reply is complete
            self._held.extend(sentences)

    def finish(self, full_text: str) -> None:
        """The step's answer is complete: send what is left (all of it, if nothing streamed)."""
        if not self.streamed and full_text:
            self._held.extend(self.splitter.feed(full_text))
        for sentence in [*self._held, *self.splitter.flush()]:
            self.say(sentence)
        self._held.clear()

    def say(self, sentence: str, name: str | None = None) -> None:
        stage = self.stage
        if not stage.spec.speak or not sentence.strip():
            return
        seq, new = progress.allocate(stage.rt, stage.turn_id,
                                     name or f"{self.step}:{self.count}")
        self.count += 1
        previous, self.previous = self.previous, sentence
        if new:
            stage.send(TtsJob(turn_id=stage.turn_id, seq=seq, text=sentence,
                              previous_text=previous, enqueued_at=time.time()))
