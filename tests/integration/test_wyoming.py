"""``voxqueue wyoming`` as Home Assistant meets it: the real command in its own process in front
of real workers, spoken to by the ``wyoming`` library's own ``AsyncTcpClient``."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from tests.conftest import ROOT, SPEECH, free_port, system_env
from voxqueue.audio import read_speech
from voxqueue.wyoming.audio_out import CHUNK_BYTES

pytestmark = pytest.mark.integration
VOXQUEUE = [sys.executable, "-m", "voxqueue.cli"]
MAX_AUDIO_BYTES = 400_000
MAX_EVENT_BYTES = 64 * 1024


@dataclass
class Server:
    port: int
    log: Path

    def client(self) -> AsyncTcpClient:
        return AsyncTcpClient("127.0.0.1", self.port)


@pytest.fixture(scope="module")
def server(system, tmp_path_factory) -> Iterator[Server]:
    port = free_port()
    env = {**system.env, "VOXQUEUE_MAX_AUDIO_BYTES": str(MAX_AUDIO_BYTES),
           "VOXQUEUE_WYOMING_MAX_EVENT_BYTES": str(MAX_EVENT_BYTES)}
    log_path = tmp_path_factory.mktemp("wyoming") / "wyoming.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([*VOXQUEUE, "wyoming", "--uri", f"tcp://127.0.0.1:{port}"],
                            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    wait_for_port(proc, port, log_path)
    yield Server(port, log_path)
    proc.terminate()
    proc.wait(10)
    log.close()


def wait_for_port(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Until the server listens (its log in the failure when it exits first)."""
    give_up = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None and time.time() < give_up, log.read_text()
            time.sleep(0.2)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def read_until(client: AsyncTcpClient, *types: str) -> list[Event]:
    """Every event up to and including the first of ``types``."""
    got = []
    while True:
        event = await client.read_event()
        assert event is not None, f"connection closed after {[e.type for e in got]}"
        got.append(event)
        if event.type in types:
            return got


def speech_pcm() -> bytes:
    return read_speech(SPEECH / "command_time.wav", max_bytes=10**8, max_seconds=600).data


async def send_audio(client: AsyncTcpClient, pcm: bytes, rate: int = 16000, width: int = 2,
                     channels: int = 1) -> None:
    await client.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
    step = rate * width * channels // 10
    for at in range(0, len(pcm), step):
        await client.write_event(AudioChunk(rate=rate, width=width, channels=channels,
                                            audio=pcm[at:at + step]).event())
    await client.write_event(AudioStop().event())


def audio_of(events: list[Event]) -> tuple[list[AudioStart], bytes, list[int]]:
    starts = [AudioStart.from_event(e) for e in events if AudioStart.is_type(e.type)]
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    assert all((c.rate, c.width, c.channels) == (16000, 2, 1) for c in chunks)
    return starts, b"".join(c.audio for c in chunks), [len(c.audio) for c in chunks]


# -- describe -----------------------------------------------------------------------------------
def test_describe_lists_stt_tts_and_the_agent(server, client):
    async def go() -> Info:
        async with server.client() as client:
            await client.write_event(Describe().event())
            (*_, info) = await read_until(client, "info")
            return Info.from_event(info)

    info = run(go())
    (asr,), (tts,), (handle,) = info.asr, info.tts, info.handle
    assert asr.installed and asr.attribution.name == "voxqueue"
    assert [m.name for m in asr.models] == ["openai"] and "en" in asr.models[0].languages
    assert tts.installed and tts.supports_synthesize_streaming
    assert tts.voices[0].installed and tts.voices[0].attribution.name == "ElevenLabs"
    assert handle.installed and handle.models[0].installed
    reported = client.redis.hgetall(client.keys.providers_in_service())
    assert reported == {b"stt": b"openai", b"llm": b"openai", b"tts": b"elevenlabs"}


def test_ping_is_answered(server):
    async def go() -> Event:
        async with server.client() as client:
            await client.write_event(Ping(text="hi").event())
            return (await read_until(client, "pong"))[-1]

    assert Pong.from_event(run(go())).text == "hi"


def test_describe_answers_at_once_when_redis_does_not(tmp_path):
    """Home Assistant waits 1 s for ``describe`` (three tries, then "unable to connect"). With
    a Redis that takes connections and never answers, the server answers from its settings
    after 0.5 s instead of riding the silence out as a turn would (10 s a try, then retries)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = free_port()
        env = system_env(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", None,
                         VOXQUEUE_STT="pocketsphinx", VOXQUEUE_LLM="local", VOXQUEUE_TTS="piper")
        log = (tmp_path / "wyoming.log").open("wb")
        proc = subprocess.Popen([*VOXQUEUE, "wyoming", "--uri", f"tcp://127.0.0.1:{port}"],
                                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(proc, port, tmp_path / "wyoming.log")

            async def go() -> Info:
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    await client.write_event(Describe().event())
                    return Info.from_event((await read_until(client, "info"))[-1])

            info = asyncio.run(asyncio.wait_for(go(), 5))
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
    assert info.asr[0].models[0].name == "pocketsphinx"
    assert info.tts[0].voices[0].name == "joe-us"
    assert info.handle[0].models[0].name == "local intents"


# -- speech to text -----------------------------------------------------------------------------
def test_transcribe_runs_one_stt_job_and_no_agent(server, fake):
    fake.script_transcripts("What time is it in Tokyo?")

    async def go() -> list[Event]:
        async with server.client() as client:
            await client.write_event(Transcribe(language="en").event())
            await send_audio(client, speech_pcm())
            return await read_until(client, "transcript", "error")

    events = run(go())
    said = Transcript.from_event(events[-1])
    assert said.text == "What time is it in Tokyo?" and said.language == "en"
    (session,) = fake.requests_for("realtime")  # streamed on as it came, to a Realtime session
    assert session["audio_bytes"] > 0 and fake.requests_for("transcriptions") == []
    assert fake.chat_requests() == [] and fake.requests_for("tts") == []


def test_transcribe_takes_any_audio_format(server, fake):
    """44.1 kHz stereo in, converted on the way: the STT provider hears the same length."""
    fake.script_transcripts("in stereo")
    pcm = speech_pcm()
    stereo = AudioChunkConverter(rate=44100, width=2, channels=2).convert(
        AudioChunk(rate=16000, width=2, channels=1, audio=pcm)).audio

    async def go() -> list[Event]:
        async with server.client() as client:
            await client.write_event(Transcribe().event())
            await send_audio(client, stereo, rate=44100, channels=2)
            return await read_until(client, "transcript", "error")

    assert Transcript.from_event(run(go())[-1]).text == "in stereo"


def test_empty_and_oversized_audio_get_an_error(server, fake):
    async def go(pcm: bytes) -> list[Event]:
        async with server.client() as client:
            await client.write_event(Transcribe().event())
            await send_audio(client, pcm)
            return await read_until(client, "transcript", "error")

    empty = Error.from_event(run(go(b""))[-1])
    assert "empty" in empty.text.lower() or "short" in empty.text.lower(), empty
    huge = Error.from_event(run(go(b"\x01\x00" * (MAX_AUDIO_BYTES // 2 + 16000)))[-1])
    assert huge.code == "audio-too-large" and "VOXQUEUE_MAX_AUDIO_BYTES" in huge.text
    assert fake.requests_for("transcriptions") == []
    assert all(r["commits"] == 0 for r in fake.requests_for("realtime"))  # nothing transcribed


def test_silence_gets_an_empty_transcript_not_an_error(server, fake):
    """What Home Assistant expects (as from wyoming-faster-whisper): a ``transcript`` with no
    text, which it reports as "no text recognized"; the connection stays open."""
    fake.script_transcripts("")

    async def go() -> list[Event]:
        async with server.client() as client:
            await client.write_event(Transcribe(language="en").event())
            await send_audio(client, bytes(2 * 16000))  # a second of silence
            said = await read_until(client, "transcript", "error")
            await client.write_event(Describe().event())  # still answering
            return [*said, *await read_until(client, "info", "error")]

    events = run(go())
    said = Transcript.from_event(next(e for e in events if e.type == "transcript"))
    assert said.text == "" and said.language == "en"
    assert events[-1].type == "info" and not any(e.type == "error" for e in events)


# -- text to speech -----------------------------------------------------------------------------
def test_synthesize_speaks_each_sentence_in_one_audio_stream(server, fake):
    text = "Good morning to you. The kettle is on and the coffee is nearly ready."

    async def go() -> list[Event]:
        async with server.client() as client:
            await client.write_event(Synthesize(text=text).event())
            return await read_until(client, "audio-stop", "error")

    events = run(go())
    starts, audio, sizes = audio_of(events)
    assert events[0].type == "audio-start" and len(starts) == 1
    assert (starts[0].rate, starts[0].width, starts[0].channels) == (16000, 2, 1)
    assert len(audio) > 16000 and max(sizes) <= CHUNK_BYTES
    spoken = [r["json"]["text"] for r in fake.requests_for("tts")]  # (in parallel: any order)
    assert sorted(" ".join(spoken).split()) == sorted(text.split()) and len(spoken) >= 2


def test_streamed_synthesis_speaks_before_the_text_ends_and_only_once(server, fake):
    # a sentence ends where the next one starts
    first = "The first sentence is ready now. And this one "
    rest = ["arrives a little ", "later."]

    async def go() -> tuple[list[Event], list[Event]]:
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text=first).event())
            early = await read_until(client, "audio-chunk")  # before the text has ended
            for piece in rest:
                await client.write_event(SynthesizeChunk(text=piece).event())
            await client.write_event(Synthesize(text=first + "".join(rest)).event())
            await client.write_event(SynthesizeStop().event())
            return early, await read_until(client, "synthesize-stopped", "error")

    early, late = run(go())
    events = early + late
    assert [e.type for e in early] == ["audio-start", "audio-chunk"]
    assert [e.type for e in late][-2:] == ["audio-stop", "synthesize-stopped"]
    assert sum(1 for e in events if e.type == "audio-start") == 1
    spoken = [r["json"]["text"] for r in fake.requests_for("tts")]
    assert spoken == ["The first sentence is ready now.", "And this one arrives a little later."]
    SynthesizeStopped.from_event(events[-1])


def test_streamed_synthesis_speaks_a_sentence_held_at_its_mark_when_the_text_pauses(server,
                                                                                 fake):
    """ "…is 156." may go on "…156.5": the next text decides, or a pause in the stream (a model
    thinking, a tool running) ends it; its audio comes before more text does."""
    async def go() -> tuple[list[Event], list[Event]]:
        async with server.client() as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="Twelve times thirteen is 156.").event())
            early = await read_until(client, "audio-chunk")  # no more text: the pause ends it
            await client.write_event(SynthesizeChunk(text=" Anything else?").event())
            await client.write_event(SynthesizeStop().event())
            return early, await read_until(client, "synthesize-stopped", "error")

    early, late = run(go())
    assert [e.type for e in early] == ["audio-start", "audio-chunk"]
    assert [e.type for e in late][-2:] == ["audio-stop", "synthesize-stopped"]
    spoken = [r["json"]["text"] for r in fake.requests_for("tts")]
    assert spoken == ["Twelve times thirteen is 156.", "Anything else?"]


# -- conversation -------------------------------------------------------------------------------
def test_a_transcript_is_a_turn_in_the_conversation_named_by_home_assistant(server, fake,
                                                                           client):
    fake.script_chat({"match": "my name is", "content": "Nice to meet you, Ada."},
                     {"match": "what is my name", "content": "You are Ada."})
    cid = f"ha-{time.time()}"

    async def say(text: str) -> Event:
        async with server.client() as c:
            await c.write_event(Transcript(text=text, context={"conversation_id": cid},
                                           language="en").event())
            return (await read_until(c, "handled", "not-handled", "error"))[-1]

    one, two = run(say("my name is Ada")), run(say("what is my name"))
    assert Handled.from_event(one).text == "Nice to meet you, Ada."
    handled = Handled.from_event(two)
    assert handled.text == "You are Ada." and handled.context == {"conversation_id": cid}
    history = [json.loads(m) for m in client.redis.lrange(client.keys.messages(
        f"wyoming:{cid}"), 0, -1)]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user", "assistant"]
    assert fake.requests_for("tts") == []  # Home Assistant speaks the answer itself


def test_a_turn_that_fails_is_not_handled(server, fake):
    fake.inject("chat", status=500, times=20)

    async def go() -> Event:
        async with server.client() as c:
            await c.write_event(Transcript(text="are you there").event())
            return (await read_until(c, "handled", "not-handled", "error"))[-1]

    answer = NotHandled.from_event(run(go()))
    assert answer.context and answer.context["conversation_id"]
    # Home Assistant says this to the person: a sentence, not the provider's status
    assert answer.text == "Sorry, something went wrong and I can't answer that right now."


# -- many clients, bad input, clients that leave -------------------------------------------------
def test_several_clients_at_once(server, fake):
    fake.script_chat(*({"match": f"client number {n}", "content": f"Hello client {n}."}
                       for n in range(4)))

    async def converse(n: int) -> str | None:
        async with server.client() as c:
            await c.write_event(Transcript(text=f"client number {n}").event())
            return Handled.from_event((await read_until(c, "handled", "error"))[-1]).text

    async def speak(n: int) -> int:
        async with server.client() as c:
            await c.write_event(Synthesize(text=f"Speaker {n} says hello.").event())
            return len(audio_of(await read_until(c, "audio-stop"))[1])

    async def all_at_once() -> list[object]:
        return await asyncio.gather(*(converse(n) for n in range(4)),
                                    *(speak(n) for n in range(4)))

    got = run(all_at_once())
    assert got[:4] == [f"Hello client {n}." for n in range(4)]
    assert all(isinstance(n, int) and n > 0 for n in got[4:])


def test_unknown_and_malformed_events_get_an_error_and_the_server_keeps_serving(server):
    async def unknown() -> list[Event]:
        async with server.client() as c:
            await c.write_event(Event(type="launch-rockets", data={"now": True}))
            await c.write_event(Event(type="synthesize", data={"no_text": 1}))
            await c.write_event(Ping().event())
            return await read_until(c, "pong")

    events = run(unknown())
    errors = [Error.from_event(e) for e in events if e.type == "error"]
    assert [e.code for e in errors] == ["unsupported-event", "bad-event"]

    async def raw(data: bytes) -> list[Event]:
        async with server.client() as c:
            assert c._writer is not None
            c._writer.write(data)
            await c._writer.drain()
            got = []
            while (event := await c.read_event()) is not None:  # the server closes
                got.append(event)
            return got

    assert [e.data["code"] for e in run(raw(b"this is not json\n"))] == ["bad-event"]
    assert [e.data["code"] for e in run(raw(b"[1, 2]\n"))] == ["bad-event"]
    huge = json.dumps({"type": "audio-chunk", "payload_length": 50_000_000}).encode() + b"\n"
    (too_large,) = run(raw(huge))
    assert too_large.data["code"] == "too-large"
    assert Pong.from_event(run(unknown())[-1])  # still serving


def test_a_client_that_leaves_mid_answer_leaves_nothing_running(server, fake, client):
    fake.set_profile(tts_rtf=1.0)  # each sentence streams in real time
    text = " ".join(f"This is sentence number {n} of a long answer." for n in range(6))
    active = client.keys.active_turns()

    async def leave_early() -> None:
        async with server.client() as c:
            await c.write_event(Synthesize(text=text).event())
            await read_until(c, "audio-chunk")
        # the connection is closed here, half way through the first sentence

    before = time.time()
    run(leave_early())
    give_up = time.time() + 10
    while client.redis.zcard(active) and time.time() < give_up:
        time.sleep(0.1)
    assert client.redis.zcard(active) == 0  # every sentence's turn has ended
    ended = client.redis.xrange(client.keys.ended_turns(), min=f"{int(before * 1000)}-0")
    statuses = [fields[b"status"].decode() for _, fields in ended]
    assert "cancelled" in statuses and set(statuses) <= {"ok", "cancelled"}, statuses
    turn_ids = [fields[b"turn_id"].decode() for _, fields in ended]
    wait_until(lambda: not any(tasks_of_turn(client.redis, t) for t in turn_ids),
               "every task of the client's turns to end")
    # a turn cancelled before its TTS job ran never reached the provider
    assert len(fake.requests_for("tts")) <= len(statuses) < 7


def test_zeroconf_advertises_the_server_as_home_assistant_looks_for_it(system, tmp_path):
    """``--zeroconf NAME``: a ``_wyoming._tcp`` service, found with the zeroconf library Home
    Assistant itself uses, at the server's port."""
    from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

    port = free_port()
    name = f"vq-test-{port}"
    log = (tmp_path / "wyoming.log").open("wb")
    proc = subprocess.Popen([*VOXQUEUE, "wyoming", "--uri", f"tcp://0.0.0.0:{port}",
                             "--zeroconf", name], env=system.env, cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
    found: dict[str, int | None] = {}

    class Seen(ServiceListener):
        def add_service(self, zc: Zeroconf, type_: str, service: str) -> None:
            info = zc.get_service_info(type_, service)
            found[service] = info.port if info else None

        def update_service(self, zc: Zeroconf, type_: str, service: str) -> None:
            self.add_service(zc, type_, service)

        def remove_service(self, zc: Zeroconf, type_: str, service: str) -> None:
            pass

    zc = Zeroconf()
    try:
        ServiceBrowser(zc, "_wyoming._tcp.local.", Seen())
        give_up = time.time() + 20
        while f"{name}._wyoming._tcp.local." not in found and time.time() < give_up:
            assert proc.poll() is None, (tmp_path / "wyoming.log").read_text()
            time.sleep(0.2)
    finally:
        zc.close()
        proc.terminate()
        proc.wait(10)
        log.close()
    assert found.get(f"{name}._wyoming._tcp.local.") == port, found


def test_audio_streams_to_the_stt_job_and_a_client_leaving_mid_utterance_cancels_it(
        server, fake, client):
    pcm = speech_pcm()
    active = client.keys.active_turns()

    def stt_started() -> bool:
        return any(e.event.type == "stt-start" for t in client.redis.zrange(active, 0, -1)
                   for e in client.store.history(t.decode()))

    async def leave_mid_utterance() -> None:
        async with server.client() as c:
            await c.write_event(Transcribe().event())
            await c.write_event(AudioStart(rate=16000, width=2, channels=1).event())
            for at in range(0, 32000, 3200):  # one second, then the client is gone
                await c.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                               audio=pcm[at:at + 3200]).event())
            give_up = time.monotonic() + 10
            while not stt_started():  # gone while the STT job reads the utterance
                assert time.monotonic() < give_up, "the STT job did not start with the audio"
                await asyncio.sleep(0.05)

    before = time.time()
    run(leave_mid_utterance())
    give_up = time.time() + 10
    while client.redis.zcard(active) and time.time() < give_up:
        time.sleep(0.1)
    assert client.redis.zcard(active) == 0
    ended = client.redis.xrange(client.keys.ended_turns(), min=f"{int(before * 1000)}-0")
    assert [fields[b"status"] for _, fields in ended] == [b"cancelled"]
    assert fake.requests_for("transcriptions") == []
    assert list(client.redis.scan_iter(match=client.keys.speech("*"))) == []
