"""Text spoken back to a Wyoming client: one TTS turn per sentence, relayed in order.

Each complete sentence is sent to the tts queue as soon as it is known (so sentences are
synthesized in parallel, by as many TTS workers as there are), and their audio is relayed in
speaking order as it arrives: one ``audio-start`` (16 kHz, 16-bit, mono) for the whole answer,
``audio-chunk``\\ s, one ``audio-stop``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from wyoming.event import Event
from wyoming.tts import SynthesizeStopped

from voxqueue.client.direct import Client, Turn
from voxqueue.spoken.sentences import PAUSE_ENDS_SENTENCE_S, SentenceSplitter, ends_sentence
from voxqueue.wyoming import audio_out
from voxqueue.wyoming.requests import LiveTurns
from voxqueue.wyoming.threads import in_thread

Write = Callable[[Event], Awaitable[None]]


class SpeechFailed(Exception):
    """A sentence could not be spoken (its TTS turn ended in an error)."""


class SpeechOut:
    """One answer: text in (all at once or in pieces), audio out, in order."""

    def __init__(self, client: Client, write: Write, *, live: LiveTurns, order: asyncio.Lock,
                 first_phrase_words: int, device: str | None = None) -> None:
        self.client = client
        self.device = device  # the device its TTS turns run as
        self.write = write
        self.live = live
        self.order = order  # held while the answer is written: answers never interleave
        self.splitter = SentenceSplitter(first_phrase_words=first_phrase_words)
        self._queue: asyncio.Queue[Turn | None] = asyncio.Queue()
        self._relay: asyncio.Task[None] | None = None
        self._trailer: Event | None = None
        self.relayed = False
        self.first_audio_at: float | None = None
        self._cutting = asyncio.Lock()  # sentences are cut and sent in order
        self._pause: asyncio.TimerHandle | None = None
        self._pauses = 0  # pauses armed: a late one knows it is not the last
        self._paused: asyncio.Task[None] | None = None

    async def feed(self, text: str) -> None:
        """More text: every sentence it completes is sent to be spoken now; one held at its
        mark ("…is 156.") is sent when no text follows for ``PAUSE_ENDS_SENTENCE_S``."""
        async with self._cutting:
            if text.strip():
                self._cancel_pause()
            for sentence in self.splitter.feed(text):
                await self._speak(sentence)
            if text.strip() and ends_sentence(text) and self.splitter.holding():
                self._pauses += 1
                armed = self._pauses
                self._pause = asyncio.get_running_loop().call_later(
                    PAUSE_ENDS_SENTENCE_S, self._on_pause, armed)

    def _on_pause(self, armed: int) -> None:
        self._pause = None
        self._paused = asyncio.create_task(self._end_at_pause(armed), name="wyoming pause")

    async def _end_at_pause(self, armed: int) -> None:
        async with self._cutting:
            if armed == self._pauses:  # no text came since
                for sentence in self.splitter.end_at_pause():
                    await self._speak(sentence)

    def _cancel_pause(self) -> None:
        if self._pause is not None:
            self._pause.cancel()
            self._pause = None

    async def finish(self, *, streamed: bool = False) -> None:
        """No more text: speak the rest, and return once the whole answer has been relayed
        (with ``synthesize-stopped`` after it when the text was streamed). Raises
        :class:`SpeechFailed` when a sentence could not be spoken."""
        if self._paused is not None:
            await self._paused  # (its error, if its sentence could not be sent, is raised here)
        async with self._cutting:
            self._cancel_pause()
            self._pauses += 1  # a pause that fired already cuts nothing now
            for sentence in self.splitter.flush():
                await self._speak(sentence)
        self._trailer = SynthesizeStopped().event() if streamed else None
        self._queue.put_nowait(None)
        await self._relaying()

    def cancel(self) -> None:
        """Stop relaying (the client left; its turns are cancelled with the connection's)."""
        self._cancel_pause()
        if self._paused is not None:
            self._paused.cancel()
        if self._relay is not None:
            self._relay.cancel()

    async def _speak(self, sentence: str) -> None:
        turn = self.live.add(await asyncio.to_thread(self.client.speak, sentence,
                                                         device=self.device))
        self._queue.put_nowait(turn)
        self._relaying()

    def _relaying(self) -> asyncio.Task[None]:
        if self._relay is None:
            self._relay = asyncio.create_task(self._relay_all(), name="wyoming speech out")
        return self._relay

    async def _relay_all(self) -> None:
        async with self.order:
            try:
                await self._relay_in_order()
            finally:
                self.relayed = True

    async def _relay_in_order(self) -> None:
        await self.write(audio_out.start())
        sent = 0
        while (turn := await self._queue.get()) is not None:
            async for pcm in in_thread(turn.playback):
                if self.first_audio_at is None:
                    self.first_audio_at = time.time()
                for event in audio_out.chunks(pcm, sent):
                    await self.write(event)
                sent += len(pcm)
            result = turn.result()
            if result.status != "ok":
                message = (result.error or {}).get("message") or result.status
                raise SpeechFailed(f"the sentence {turn.spec.text!r} was not spoken: {message}")
        await self.write(audio_out.stop(sent))
        if self._trailer is not None:
            await self.write(self._trailer)
