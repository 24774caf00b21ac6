"""What reading a voice's stream costs, and why: the same audio read in different ways.

    .venv/bin/python -m bench.stream_read [--streams 4] [--rounds 4]

The bench reply's audio (~370 KB, ~115 pieces of 100 ms) from the fake ElevenLabs server, N
streams at a time, read in each of these ways, alternating round by round, in one run:

- ``sdk, paced``: the official SDK's ``stream``, a thread per stream, the audio arriving as
  the fake voice sends it (100 ms of audio every 25 ms), each piece read as it comes;
- ``sdk, paced, in batches``: the same, through ``workers.tts.chunking.rechunk``, which pauses
  between reads while the listener has audio in hand (what the TTS task does);
- ``httpx, paced``: the same requests through httpx alone (no SDK layers);
- ``async sdk, paced``: ``AsyncElevenLabs``, every stream on one asyncio loop;
- ``sdk, all there``: the same audio from a second fake server that sends it at once.

Prints CPU ms and wake-ups (context switches) per stream, and each as a multiple of the
``sdk, all there`` read: what the pieces' arrivals cost beyond the parsing of the bytes.

Then the model's side, the same way: the bench reply as chat-completion tokens (60 a second
after 0.35 s) through the OpenAI SDK as the agent reads them (``workers/agent/providers/
openai_chat.py``: the SDK's SSE stream, chunks left as JSON), each token as it arrives; in
batches, the first sentence as it comes, then as the agent pauses at most
(``workers/runtime/batching.py``, a listener with audio in hand all along: the fewest wake-ups
the agent's reading can have); and all there at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from bench.latency import PROFILE, REPLY
from tests.conftest import ROOT
from tests.fakes import spawn
from workers.runtime.batching import BLOCKED_READ_S, READ_PAUSE_S, Arrival
from workers.tts.chunking import rechunk

KEY = "el-bench-0123456789"
OPTIONS: Any = {"max_retries": 0, "chunk_size": None}  # each piece as it arrives


def usage() -> tuple[float, int]:
    """CPU seconds and context switches of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


def in_threads(read_one: Callable[[], int], streams: int) -> int:
    """``streams`` reads at once, a thread each; the bytes read in all."""
    sizes: list[int] = []
    threads = [threading.Thread(target=lambda: sizes.append(read_one())) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(sizes)


def sdk_reader(base_url: str, batches: bool = False) -> Callable[[int], int]:
    from elevenlabs.client import ElevenLabs

    client = ElevenLabs(api_key=KEY, base_url=base_url)

    def read_one() -> int:
        pieces: Iterable[bytes] = client.text_to_speech.stream(
            "v", text=REPLY, model_id="m", output_format="pcm_16000", request_options=OPTIONS)
        if batches:
            pieces = rechunk(pieces, sleep=time.sleep)
        return sum(map(len, pieces))

    return lambda streams: in_threads(read_one, streams)


def httpx_reader(base_url: str) -> Callable[[int], int]:
    import httpx

    client = httpx.Client(base_url=base_url, timeout=30)

    def read_one() -> int:
        with client.stream("POST", "/v1/text-to-speech/v/stream",
                           params={"output_format": "pcm_16000"}, headers={"xi-api-key": KEY},
                           json={"text": REPLY, "model_id": "m"}) as answer:
            return sum(map(len, answer.iter_raw()))

    return lambda streams: in_threads(read_one, streams)


def async_reader(base_url: str) -> Callable[[int], int]:
    from elevenlabs.client import AsyncElevenLabs

    loop = asyncio.new_event_loop()
    client = AsyncElevenLabs(api_key=KEY, base_url=base_url)

    async def read_one() -> int:
        n = 0
        async for piece in client.text_to_speech.stream(
                "v", text=REPLY, model_id="m", output_format="pcm_16000",
                request_options=OPTIONS):
            n += len(piece)
        return n

    async def read_all(streams: int) -> int:
        return sum(await asyncio.gather(*(read_one() for _ in range(streams))))

    return lambda streams: loop.run_until_complete(read_all(streams))


def llm_reader(base_url: str, batches: bool = False) -> Callable[[int], int]:
    import openai

    client = openai.OpenAI(api_key="sk-bench-0123456789", base_url=base_url, max_retries=0)
    body = {"model": "m", "messages": [{"role": "user", "content": "weather in Lisbon"}],
            "stream": True, "stream_options": {"include_usage": True}}

    def read_one() -> int:
        stream = client.post("/chat/completions", body=body, cast_to=object, stream=True,
                             stream_cls=openai.Stream[object])
        arrival, n, returned, sentence_out = Arrival(), 0, time.monotonic(), False
        for chunk in stream:
            now = time.monotonic()
            waited = now - returned >= BLOCKED_READ_S
            for choice in chunk.get("choices") or []:  # type: ignore[attr-defined]
                text = (choice.get("delta") or {}).get("content") or ""
                n += len(text)
                sentence_out = sentence_out or "." in text
            arrival.read(1, now, waited)
            if batches and sentence_out and (pause := arrival.pause(waited, now, READ_PAUSE_S)):
                time.sleep(pause)
            returned = time.monotonic()
        return n

    return lambda streams: in_threads(read_one, streams)


def measure(read: Callable[[int], int], streams: int) -> tuple[float, float, int]:
    """CPU ms and wake-ups per stream of one round, and the bytes read."""
    cpu0, switches0 = usage()
    size = read(streams)
    cpu1, switches1 = usage()
    return (cpu1 - cpu0) * 1000 / streams, (switches1 - switches0) / streams, size


def ratios(results: dict[str, list[tuple[float, float]]],
           base: str) -> Iterator[tuple[str, float, float, float, float]]:
    """Per way of reading: median CPU ms and wake-ups per stream, and each over ``base``'s."""
    med = {name: (statistics.median(c for c, _ in rows), statistics.median(w for _, w in rows))
           for name, rows in results.items()}
    cpu0, woke0 = med[base]
    for name, (cpu, woke) in med.items():
        yield name, cpu, woke, cpu / cpu0 if cpu0 else 0.0, woke / woke0 if woke0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    paced_proc, paced = spawn(profile=dict(PROFILE), cwd=str(ROOT))
    at_once_proc, at_once = spawn(profile={**PROFILE, "tts_rtf": 0.0, "tts_ttfb_s": 0.0,
                                           "llm_ttft_s": 0.0, "llm_tokens_per_s": 0.0},
                                  cwd=str(ROOT))
    try:
        ways = {
            "sdk, paced": sdk_reader(paced.elevenlabs_base_url),
            "sdk, paced, in batches": sdk_reader(paced.elevenlabs_base_url, batches=True),
            "httpx, paced": httpx_reader(paced.elevenlabs_base_url),
            "async sdk, paced": async_reader(paced.elevenlabs_base_url),
            "sdk, all there": sdk_reader(at_once.elevenlabs_base_url),
        }
        sizes = {name: read(1) for name, read in ways.items()}  # warm-up
        if len(set(sizes.values())) != 1:
            raise SystemExit(f"the ways read different audio: {json.dumps(sizes)}")
        for fake in (paced, at_once):
            fake.script_chat({"repeat": True, "content": REPLY})
        tokens = {
            "openai sdk, paced": llm_reader(paced.openai_base_url),
            "openai sdk, paced, in batches": llm_reader(paced.openai_base_url, batches=True),
            "openai sdk, all there": llm_reader(at_once.openai_base_url),
        }
        lengths = {name: read(1) for name, read in tokens.items()}
        if len(set(lengths.values())) != 1:
            raise SystemExit(f"the ways read different text: {json.dumps(lengths)}")
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        token_results: dict[str, list[tuple[float, float]]] = {name: [] for name in tokens}
        for _ in range(args.rounds):
            for table, readers in ((results, ways), (token_results, tokens)):
                for name, read in readers.items():
                    cpu, woke, _size = measure(read, args.streams)
                    table[name].append((cpu, woke))
    finally:
        for proc in (paced_proc, at_once_proc):
            proc.terminate()
            proc.wait(10)
    print(f"\nthe bench reply's audio ({sizes['sdk, all there'] // 1000} KB), {args.streams} "
          f"streams at a time, {args.rounds} rounds; medians per stream")
    print("| read | CPU ms | wake-ups | CPU × all there | wake-ups × all there |")
    print("|---|---|---|---|---|")
    for name, cpu, woke, cpu_x, woke_x in ratios(results, "sdk, all there"):
        print(f"| {name} | {cpu:.1f} | {woke:.0f} | {cpu_x:.1f} | {woke_x:.1f} |")
    print(f"\nthe bench reply as the model's tokens ({lengths['openai sdk, all there']} "
          f"characters), {args.streams} streams at a time; medians per stream")
    print("| read | CPU ms | wake-ups | CPU × all there | wake-ups × all there |")
    print("|---|---|---|---|---|")
    for name, cpu, woke, cpu_x, woke_x in ratios(token_results, "openai sdk, all there"):
        print(f"| {name} | {cpu:.1f} | {woke:.0f} | {cpu_x:.1f} | {woke_x:.1f} |")


if __name__ == "__main__":
    main()
