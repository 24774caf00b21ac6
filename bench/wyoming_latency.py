"""What Home Assistant waits for through ``voxqueue wyoming``, beside the Python client.

    .venv/bin/python -m bench.wyoming_latency [--turns 20]

Real worker processes (the pools ``voxqueue up`` runs), a private Redis, the fake providers in
a process of their own with ``bench.latency``'s profile (STT 0.30 s, TTS first byte 0.12 s),
and ``voxqueue wyoming`` in its own process, spoken to with the ``wyoming`` library's
``AsyncTcpClient``. Rows alternate Wyoming and the Python client, in one run:

- speech to text: ``audio-stop`` written → ``transcript`` read, vs ``Client.transcribe`` →
  its result (both store the audio and run one STT job);
- text to speech: ``synthesize`` written → first ``audio-chunk`` read, vs ``Client.speak`` →
  first PCM from ``Turn.playback`` (the same three sentences).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time

from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

from bench.harness import BenchSystem, bench_system, percentile
from bench.latency import PROFILE, QUESTION, REPLY
from testkit import ROOT, free_port
from voxqueue.audio import read_speech


def start_server(system: BenchSystem, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "voxqueue.cli", "wyoming", "--uri",
                             f"tcp://127.0.0.1:{port}"], env=system.sup.env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    give_up = time.time() + 30
    while time.time() < give_up:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("voxqueue wyoming did not start")


async def wyoming_stt(port: int, pcm: bytes) -> float:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=16000, width=2, channels=1).event())
        for at in range(0, len(pcm), 3200):
            await client.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                                audio=pcm[at:at + 3200]).event())
        start = time.perf_counter()
        await client.write_event(AudioStop().event())
        while (event := await client.read_event()) is not None:
            if event.type == "transcript":
                return (time.perf_counter() - start) * 1000
    raise RuntimeError("no transcript")


async def wyoming_tts(port: int, text: str) -> float:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        start = time.perf_counter()
        await client.write_event(Synthesize(text=text).event())
        first = None
        while (event := await client.read_event()) is not None:
            if event.type == "audio-chunk" and first is None:
                first = (time.perf_counter() - start) * 1000
            if event.type == "audio-stop" and first is not None:
                return first
    raise RuntimeError("no audio")


def client_stt(system: BenchSystem, pcm: bytes) -> float:
    start = time.perf_counter()
    result = system.client.transcribe(pcm, pcm_rate=16000).wait(timeout=60)
    assert result.status == "ok", result.error
    return (time.perf_counter() - start) * 1000


def client_tts(system: BenchSystem, text: str) -> float:
    start = time.perf_counter()
    turn = system.client.speak(text)
    first = None
    for _ in turn.playback(timeout=60):
        first = first or (time.perf_counter() - start) * 1000
    assert first is not None
    return first


def row(name: str, wyoming: list[float], client: list[float]) -> str:
    w50, c50 = percentile(wyoming, 50), percentile(client, 50)
    return (f"| {name} | {w50:.0f} / {percentile(wyoming, 95):.0f} | "
            f"{c50:.0f} / {percentile(client, 95):.0f} | {w50 / c50:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    pcm = read_speech(QUESTION, max_bytes=10**8, max_seconds=600).data
    with bench_system(PROFILE, separate_fake=True) as system:
        system.fake.set_default_transcript("What is the weather in Paris?")
        port = free_port()
        server = start_server(system, port)
        try:
            for _ in range(2):  # warm both paths
                asyncio.run(wyoming_stt(port, pcm))
                client_stt(system, pcm)
            stt: tuple[list[float], list[float]] = ([], [])
            tts: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.turns):
                stt[0].append(asyncio.run(wyoming_stt(port, pcm)))
                stt[1].append(client_stt(system, pcm))
                tts[0].append(asyncio.run(wyoming_tts(port, REPLY)))
                tts[1].append(client_tts(system, REPLY))
        finally:
            server.terminate()
            server.wait(10)
    print(f"{args.turns} of each, alternating; ms p50 / p95")
    print("| path | Wyoming | Python client | Wyoming / client (p50) |")
    print("|---|---|---|---|")
    print(row("speech to text: audio-stop → transcript", *stt))
    print(row("text to speech: synthesize → first audio-chunk", *tts))


if __name__ == "__main__":
    main()
