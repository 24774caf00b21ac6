"""One Wyoming connection: its events in, its answers out.

Events are read in order; every request that waits on the queues runs in a task of its own, so
the connection keeps reading (a client that leaves is noticed at once and its turns are
cancelled). Answers are written one at a time, in the order the requests came.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Sequence
from typing import Any

import redis
import structlog
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from voxqueue.client.direct import Client, InputError, SpeechStream, Turn, Unavailable
from voxqueue.observability.redaction import redact_text
from voxqueue.settings import Settings
from voxqueue.wyoming.audio_in import AudioIn, AudioTooLarge
from voxqueue.wyoming.describe import describe
from voxqueue.wyoming.guard import (
    CappedReader,
    EventTooLarge,
    Network,
    PeerRate,
    RateLimited,
    WyomingPolicy,
    allowed,
)
from voxqueue.wyoming.requests import LiveTurns, RequestFailed, converse, transcript_of
from voxqueue.wyoming.speech_out import SpeechFailed, SpeechOut

log = structlog.get_logger("voxqueue.wyoming")


class WyomingHandler(AsyncEventHandler):
    """Serves ``describe``, ``ping``, speech to text, text to speech and conversation."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 client: Client, settings: Settings, allow: Sequence[Network],
                 policy: WyomingPolicy, rate: PeerRate) -> None:
        super().__init__(reader, writer)
        self.client = client
        self.settings = settings
        self.allow = allow
        self.policy = policy
        self.rate = rate  # shared by the server's connections: counted per client address
        self.peer = writer.get_extra_info("peername")
        self.audio: AudioIn | None = None
        self._speech: SpeechStream  # the utterance's stream, while ``audio`` is set
        self.language: str | None = None
        self.speech: SpeechOut | None = None  # a streamed synthesis being fed
        self.speeches: list[SpeechOut] = []
        self.live = LiveTurns()
        self.work: set[asyncio.Task[None]] = set()
        self.answering = asyncio.Lock()  # answers are written whole, in request order
        self._writing = asyncio.Lock()

    # -- the connection ------------------------------------------------------------------------
    async def run(self) -> None:
        """Read events until the client leaves, sends what it may not, or a request fails."""
        if not allowed(self.peer, self.allow):
            log.warning("wyoming client refused: not in VOXQUEUE_WYOMING_ALLOW",
                        peer=str(self.peer))
            self.writer.close()
            return
        reader = CappedReader(self.reader, self.settings.wyoming.max_event_bytes)
        self._is_running = True
        try:
            while self._is_running:
                try:
                    event = await async_read_event(reader)  # type: ignore[arg-type]
                except EventTooLarge as exc:
                    await self._error("too-large", str(exc))
                    break
                except (asyncio.IncompleteReadError, ConnectionError):
                    break  # the client left mid-event
                except Exception as exc:  # a header that is JSON but not an event
                    await self._error("bad-event", f"not a Wyoming event: {exc}")
                    break
                if event is None:
                    if reader.last_line.strip():  # a line that is not JSON at all
                        await self._error("bad-event", "not a Wyoming event (not JSON)")
                    break
                try:
                    if not await self.handle_event(event):
                        break
                except (InputError, AudioTooLarge, RateLimited) as exc:  # said, then closed
                    code = getattr(exc, "code", "audio-too-large")
                    await self._error(str(code), str(exc))
                    break
                except (KeyError, TypeError, ValueError) as exc:
                    await self._error("bad-event", f"a malformed {event.type!r} event: {exc}")
        finally:
            await self.disconnect()
            self.writer.close()

    async def write_event(self, event: Event) -> None:
        async with self._writing:
            await super().write_event(event)

    async def disconnect(self) -> None:
        """The client left (or was sent away): stop its answers and cancel its turns."""
        self._is_running = False
        self.audio = None  # an utterance under way is cancelled with the other turns
        for task in list(self.work):
            task.cancel()
        for speech in self.speeches:
            speech.cancel()
        if self.live.turns:
            await asyncio.to_thread(self.live.cancel_all, "the Wyoming client left")

    # -- events ---------------------------------------------------------------------------
    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            in_service = await asyncio.to_thread(self._providers_in_service)
            await self.write_event(describe(self.settings, in_service).event())
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=Ping.from_event(event).text).event())
        elif Transcribe.is_type(event.type):
            self.language = Transcribe.from_event(event).language
        elif AudioStart.is_type(event.type):
            await self._drop_audio("a new audio-start")
            await self._open_audio(AudioStart.from_event(event))
        elif AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            if self.audio is None:  # no audio-start: take the first chunk's format
                await self._open_audio(AudioStart(rate=chunk.rate, width=chunk.width,
                                                  channels=chunk.channels))
            assert self.audio is not None
            await asyncio.to_thread(self.audio.add, chunk)
        elif AudioStop.is_type(event.type):
            audio, self.audio = self.audio, None
            if audio is None or audio.size == 0:
                if audio is not None:
                    await asyncio.to_thread(self._speech.abort, "no audio")
                raise InputError("audio-invalid", "the audio is empty")
            turn = await asyncio.to_thread(self._speech.end)
            self._answer(self._transcript_of(turn, self.language))
        elif Transcript.is_type(event.type):
            said = Transcript.from_event(event)
            self.rate.hit(self.peer)
            self._answer(self._converse(said.text, said.context))
        elif SynthesizeStart.is_type(event.type):
            SynthesizeStart.from_event(event)
            self.rate.hit(self.peer)
            self.speech = self._speech_out()
        elif SynthesizeChunk.is_type(event.type):
            text = SynthesizeChunk.from_event(event).text
            if self.speech is not None:
                await self.speech.feed(text)
        elif SynthesizeStop.is_type(event.type):
            speech, self.speech = self.speech, None
            if speech is not None:
                self._answer(speech.finish(streamed=True), ordered=False)
        elif Synthesize.is_type(event.type):
            text = Synthesize.from_event(event).text
            if self.speech is None:  # inside a stream it is the copy for older servers
                self.rate.hit(self.peer)
                self._answer(self._synthesize(text), ordered=False)
        else:
            await self._error("unsupported-event",
                              f"voxqueue's Wyoming server does not take {event.type!r} events")
        return True

    # -- requests ---------------------------------------------------------------------------
    def _providers_in_service(self) -> dict[str, str]:
        """The providers the workers reported; empty when Redis cannot say."""
        try:
            found = self.client.redis.hgetall(self.client.keys.providers_in_service())
        except redis.RedisError:
            return {}
        return {_text(k): _text(v) for k, v in found.items()}

    async def _open_audio(self, start: AudioStart) -> None:
        """The utterance's turn starts now: its STT job reads the audio as it arrives."""
        self.rate.hit(self.peer)
        self._speech = self.live.add_stream(await asyncio.to_thread(
            self.client.stream, until="transcript", device=self.policy.device))
        self.audio = AudioIn(start, self.settings.turns.max_audio_bytes, self._speech)

    async def _drop_audio(self, why: str) -> None:
        if self.audio is not None:
            self.audio = None
            await asyncio.to_thread(self._speech.abort, f"the utterance was dropped: {why}")

    async def _transcript_of(self, turn: Turn, language: str | None) -> None:
        await self.write_event(await transcript_of(turn, language))

    async def _converse(self, text: str, context: dict[str, Any] | None) -> None:
        await self.write_event(await converse(self.client, self.live, text, context,
                                              self.policy))

    async def _synthesize(self, text: str) -> None:
        speech = self._speech_out()
        await speech.feed(text)
        await speech.finish()

    def _speech_out(self) -> SpeechOut:
        speech = SpeechOut(self.client, self.write_event, live=self.live, order=self.answering,
                           first_phrase_words=self.settings.agent.first_phrase_words,
                           device=self.policy.device)
        self.speeches = [s for s in self.speeches if not s.relayed] + [speech]
        return speech

    def _answer(self, request: Coroutine[Any, Any, None], *, ordered: bool = True) -> None:
        """Run a request in its own task; a failure is sent as an ``error`` and ends the
        connection (Home Assistant then reports it at once instead of waiting)."""

        async def run() -> None:
            try:
                if ordered:
                    async with self.answering:
                        await request
                else:
                    await request
            except (RequestFailed, InputError) as exc:
                await self._error(str(exc.code), str(exc), end=True)
            except SpeechFailed as exc:
                await self._error("tts-failed", str(exc), end=True)
            except Unavailable as exc:
                await self._error("unavailable", str(exc), end=True)

        task = asyncio.create_task(run(), name="wyoming request")
        self.work.add(task)
        task.add_done_callback(self.work.discard)

    async def _error(self, code: str, text: str, *, end: bool = False) -> None:
        log.warning("wyoming error", code=code, text=redact_text(text), peer=str(self.peer))
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.write_event(Error(text=text, code=code).event())
        if end:
            await self.stop()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
