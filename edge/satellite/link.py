"""The connection to one satellite, kept up as Home Assistant keeps it: ``describe``,
``run-satellite``, a ping every few seconds, and a new connection with backoff when the
satellite restarts or stops answering.

Each ``run-pipeline`` turns the audio that follows into a turn through the queues; its answer
(``transcript``, ``synthesize``, the reply's audio) is written back as it comes. Announcements
and timers for the device are spoken on the satellite between turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.pipeline import PipelineStage, RunPipeline
from wyoming.satellite import RunSatellite
from wyoming.vad import VoiceStarted, VoiceStopped
from wyoming.wake import Detection

from edge.announcements import Announcement
from edge.conversation import Conversation
from edge.frames import RATE
from edge.link import Backoff
from edge.pipeline import NoSpeech, Utterance, Woke
from edge.satellite.answer import answer_events
from edge.satellite.ears import Ears, SpeechStarted
from edge.settings import EdgeSettings
from voxqueue.client.direct import Client, Turn
from voxqueue.client.gateway import GatewayClient
from voxqueue.wyoming import audio_out
from voxqueue.wyoming.threads import in_thread

log = logging.getLogger("voxqueue.satellite")

#: Seconds between pings, and without a pong before the satellite is taken for gone.
PING_EVERY_S = 2.0
PONG_TIMEOUT_S = 10.0


class SatelliteGone(ConnectionError):
    """The satellite closed the connection or stopped answering pings."""


class SatelliteLink:
    """Serves one satellite until stopped, reconnecting whenever it goes away."""

    def __init__(self, uri: str, client: Client | GatewayClient, ears: Ears,
                 edge: EdgeSettings, *, language: str | None = "en") -> None:
        self.uri = uri
        self.client = client
        self.ears = ears
        self.edge = edge
        self.language = language
        self.conversation = Conversation(edge)
        self.backoff = Backoff(first_s=0.5, max_s=10.0)
        self.connections = 0
        self.info: Info | None = None
        self.turns: list[Turn] = []
        self._announcements: asyncio.Queue[Announcement] = asyncio.Queue()
        self._client: AsyncClient | None = None
        self._writing = asyncio.Lock()
        self._answering: asyncio.Task[None] | None = None
        self._stage: str | None = None  # the running pipeline's start stage
        self._speak = True

    def announce(self, item: Announcement) -> None:
        """Queue an announcement (thread-safe through ``call_soon_threadsafe``)."""
        self._announcements.put_nowait(item)

    async def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Connect, serve, and on any loss connect again after a growing pause."""
        while not stop():
            started = time.monotonic()
            try:
                await self._serve()
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                log.warning("satellite %s: %s", self.uri, exc or exc.__class__.__name__)
            finally:
                await self._drop()
            if time.monotonic() - started > 30:
                self.backoff.reset()
            await asyncio.sleep(self.backoff.next())

    # -- one connection -----------------------------------------------------------------------
    async def _serve(self) -> None:
        self._client = AsyncClient.from_uri(self.uri)
        await self._client.connect()
        await self._write(Describe().event())
        while not Info.is_type((event := await self._read()).type):
            pass
        self.info = Info.from_event(event)
        self.connections += 1
        log.info("satellite %s connected (%s)", self.uri, _name_of(self.info))
        await self._write(RunSatellite().event())
        self.last_pong = time.monotonic()
        tasks = [asyncio.create_task(self._ping()), asyncio.create_task(self._speak_unasked())]
        try:
            while True:
                await self._on(await self._read())
        finally:
            for task in tasks:
                task.cancel()

    async def _on(self, event: Event) -> None:
        if Pong.is_type(event.type):
            self.last_pong = time.monotonic()
        elif Ping.is_type(event.type):
            await self._write(Pong(text=Ping.from_event(event).text).event())
        elif RunPipeline.is_type(event.type):
            run = RunPipeline.from_event(event)
            self._stage = PipelineStage(run.start_stage).value
            self._speak = PipelineStage(run.end_stage) == PipelineStage.TTS
            log.info("satellite pipeline from the %s stage to %s", self._stage,
                     PipelineStage(run.end_stage).value)
            if self._stage == PipelineStage.WAKE.value:
                self.ears.wake_stage()
            else:  # the satellite heard its own wake word: the command follows
                self.ears.command_stage()
                await self._write(Transcribe(language=self.language).event())
        elif AudioChunk.is_type(event.type):
            for heard in self.ears.hear(AudioChunk.from_event(event)):
                await self._heard(heard)
        elif AudioStop.is_type(event.type):
            self.ears.deaf()

    async def _heard(self, heard: object) -> None:
        ms = int(getattr(heard, "at", 0.0) * 1000)
        if isinstance(heard, Woke):
            await self._write(Detection(name=heard.detection.name, timestamp=ms).event())
            await self._write(Transcribe(language=self.language).event())
        elif isinstance(heard, SpeechStarted):
            await self._write(VoiceStarted(timestamp=ms).event())
        elif isinstance(heard, Utterance):
            await self._write(VoiceStopped(timestamp=ms).event())
            self._answering = asyncio.create_task(self._answer(heard.pcm))
        elif isinstance(heard, NoSpeech):
            await self._write(Transcript(text="").event())  # the satellite listens afresh
            self._listen_again()

    async def _answer(self, pcm: bytes) -> None:
        """One turn from the command's audio, answered on the satellite as it progresses."""
        try:
            turn = await asyncio.to_thread(
                self.client.say, pcm, pcm_rate=RATE, session=self.conversation.session_id(),
                device=self.edge.device, speak=self._speak, deadline_s=self.edge.deadline_s)
            self.turns.append(turn)
            async for event in in_thread(lambda: answer_events(turn)):
                await self._write(event)
        except Exception as exc:  # the queues cannot be reached: say so on the satellite
            log.warning("satellite turn failed: %s", exc)
            await self._write(Transcript(text="").event())
            await self._write(Error(text=str(exc), code=getattr(exc, "code", "error")).event())
        finally:
            self._listen_again()

    def _listen_again(self) -> None:
        """A satellite that streams all the time is listened to for the wake word again; one
        with its own wake word starts the next pipeline itself."""
        if self._stage == PipelineStage.WAKE.value:
            self.ears.wake_stage()
        else:
            self.ears.deaf()

    async def _speak_unasked(self) -> None:
        while True:
            item = await self._announcements.get()
            while self._answering is not None and not self._answering.done():
                await asyncio.sleep(0.1)  # never over a reply
            await self._announce(item)

    async def _announce(self, item: Announcement) -> None:
        if item.pcm:
            for event in (audio_out.start(), *audio_out.chunks(item.pcm),
                          audio_out.stop(len(item.pcm))):
                await self._write(event)
            return
        turn = await asyncio.to_thread(self.client.speak, item.text, device=self.edge.device)
        async for event in in_thread(lambda: answer_events(turn, spoken=False)):
            await self._write(event)

    async def _ping(self) -> None:
        while True:
            await asyncio.sleep(PING_EVERY_S)
            if time.monotonic() - self.last_pong > PONG_TIMEOUT_S:
                log.warning("satellite %s stopped answering pings", self.uri)
                if self._client is not None and self._client._writer is not None:
                    self._client._writer.close()  # the read loop ends and reconnects
                return
            await self._write(Ping().event())

    async def _read(self) -> Event:
        assert self._client is not None
        event = await self._client.read_event()
        if event is None:
            raise SatelliteGone("the satellite closed the connection")
        return event

    async def _write(self, event: Event) -> None:
        if self._client is None:
            return
        async with self._writing:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._client.write_event(event)

    async def _drop(self) -> None:
        if self._answering is not None:
            self._answering.cancel()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.disconnect()
        self._client = None
        self.ears.deaf()


def _name_of(info: Info) -> str:
    satellite = getattr(info, "satellite", None)
    return getattr(satellite, "name", None) or "a Wyoming satellite"
