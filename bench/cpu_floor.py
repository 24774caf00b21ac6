"""The CPU floor of a turn: a bare Celery chain with a turn's hops, relaying its audio bytes.

One ``floor_turn`` task on the ``agent`` queue (the agent's step) sends one ``floor_speak`` task
per sentence to ``tts``; each appends the sentence's audio to the turn's stream in the same
chunks as the real turn (random bytes of the same sizes) and an end marker; the client reads the
stream until every sentence has ended. The workers run voxqueue's Celery settings and default
pools and processes, on the same Redis, so the difference from a real turn is our own work.

The floor with the providers' streams (``floor_turn_read``, ``floor_speak_read``) is the same
chain where the agent's step reads the model's reply from the (fake) OpenAI server, sending each
piece's TTS task once its text is in, and each TTS task reads its piece's audio from the (fake)
ElevenLabs server, both through the official SDKs in their plain streaming calls, each piece as
it arrives (the OpenAI stream's chunks left as JSON, as the agent reads them): what a turn costs
that only moves the providers' streams, with none of voxqueue's guarantees or batching. With
``pause_s``, every read of the voice's stream, and of the model's once the first piece is sent,
that had to wait is followed by that pause, so the next read takes what piled up meanwhile: the
fewest wake-ups such a reading can have, with no listener to keep fed (voxqueue pauses at most
0.2 s, and only while the listener has audio in hand).

    celery -A bench.cpu_floor worker -Q agent|tts   (started by ``start_workers``)
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import redis
from celery import Celery

from voxqueue.celery_config import celery_config
from voxqueue.settings import RedisSettings, Settings, ignore_dotenv
from voxqueue.up.process_table import DEFAULT_POOLS, DEFAULT_PROCESSES

ignore_dotenv()  # a benchmark reads what it sets, never a .env file
app = Celery("bench-cpu-floor")
app.conf.update(celery_config(Settings()))


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(app.conf.broker_url)


@functools.cache
def _noise(size: int) -> bytes:
    return os.urandom(size)


@app.task(name="voxqueue.agent.floor_turn")
def floor_turn(turn: str, sentences: list[list[int]]) -> None:
    """The agent's step: one TTS task per sentence."""
    for seq, chunks in enumerate(sentences):
        floor_speak.apply_async(args=[turn, seq, chunks], queue="tts")


@app.task(name="voxqueue.tts.floor_speak")
def floor_speak(turn: str, seq: int, chunks: list[int]) -> None:
    """A sentence's audio, chunk by chunk, then its end."""
    r = _redis()
    for size in chunks:
        r.xadd(f"floor:{turn}", {"a": _noise(size)})
    r.xadd(f"floor:{turn}", {"end": seq})


#: The floor's pause after a read that waited: voxqueue's longest
#: (``workers.runtime.batching.READ_PAUSE_S``), kept here so that the bench run in an older
#: commit's tree (``bench.cpu_before_after``) needs nothing of that tree's code.
PAUSE_S = 0.2

T = TypeVar("T")


def _in_batches(pieces: Iterable[T], pause_s: float,
                pausing: Callable[[], bool] = lambda: True) -> Iterator[T]:
    """``pieces`` as they come; after a read that had to wait, ``pause_s`` of sleep (when
    ``pausing()``), so the next reads take what piled up meanwhile."""
    it = iter(pieces)
    while True:
        began = time.perf_counter()
        try:
            piece = next(it)
        except StopIteration:
            return
        waited = time.perf_counter() - began > 0.002
        yield piece
        if pause_s and waited and pausing():
            time.sleep(pause_s)


@functools.cache
def _model() -> Any:
    import openai

    return openai.OpenAI(max_retries=0)  # OPENAI_API_KEY and OPENAI_BASE_URL: the fake's


@functools.cache
def _voice() -> Any:
    from elevenlabs.client import ElevenLabs

    return ElevenLabs(api_key=os.environ["ELEVENLABS_API_KEY"],
                      base_url=os.environ["VOXQUEUE_ELEVENLABS_BASE_URL"])


def _read_model(pieces: list[str], pause_s: float, send: Callable[[int], None]) -> None:
    """The agent's step: read the model's reply, ``send(seq)`` each piece once its text is in
    (the last at the reply's end)."""
    import openai

    stream = _model().post(
        "/chat/completions", cast_to=object, stream=True, stream_cls=openai.Stream[object],
        body={"model": "gpt-4o-mini", "stream": True,
              "messages": [{"role": "user", "content": "weather tomorrow"}]})
    ends = list(itertools.accumulate(len(p) + 1 for p in pieces))
    got, sent = 0, []  # the pieces sent to TTS
    for chunk in _in_batches(stream, pause_s, lambda: bool(sent)):
        for choice in chunk.get("choices") or []:
            got += len((choice.get("delta") or {}).get("content") or "")
        while len(sent) < len(pieces) - 1 and got >= ends[len(sent)]:
            sent.append(len(sent))
            send(sent[-1])
    for seq in range(len(sent), len(pieces)):
        send(seq)


@app.task(name="voxqueue.agent.floor_turn_read")
def floor_turn_read(turn: str, pieces: list[str], sentences: list[list[int]],
                    pause_s: float = 0.0) -> None:
    """The agent's step reading the model's stream: a TTS task per piece once its text is in."""
    _read_model(pieces, pause_s, lambda seq: floor_speak_read.apply_async(
        args=[turn, seq, pieces[seq], sentences[seq], pause_s], queue="tts"))


@app.task(name="voxqueue.tts.floor_speak_read")
def floor_speak_read(turn: str, seq: int, text: str, chunks: list[int],
                     pause_s: float = 0.0) -> None:
    """A piece's audio read from the voice as it arrives, relayed in the real turn's chunks."""
    r, key = _redis(), f"floor:{turn}"
    sizes = iter(chunks)
    want, held = next(sizes, 0), bytearray()
    for audio in _in_batches(_voice().text_to_speech.stream(
            "JBFqnCBsd6RMkjVDRZzb", text=text, model_id="eleven_flash_v2_5",
            output_format="pcm_16000", request_options={"max_retries": 0, "chunk_size": None}),
            pause_s):
        held += audio
        while want and len(held) >= want:
            r.xadd(key, {"a": bytes(held[:want])})
            del held[:want]
            want = next(sizes, 0)
    if held:
        r.xadd(key, {"a": bytes(held)})
    r.xadd(key, {"end": seq})


def start_workers(redis_url: str, log_dir: Path,
                  env: dict[str, str] | None = None) -> list[subprocess.Popen[bytes]]:
    """The floor's worker processes: as many per queue, and the same pools, as ours
    (``env``: the providers' keys and URLs, for the floor with the providers' streams)."""
    env = {**(env or os.environ), "VOXQUEUE_REDIS_URL": redis_url,
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    procs = []
    for queue in ("agent", "tts"):
        pool, concurrency = DEFAULT_POOLS[queue]
        for i in range(DEFAULT_PROCESSES.get(queue, 1)):
            log = (log_dir / f"floor-{queue}-{i}.log").open("ab")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "bench.cpu_floor", "worker", "-Q", queue,
                 "-n", f"floor-{queue}-{i}@%h", "-P", pool, "-c", str(concurrency),
                 "--prefetch-multiplier", "1", "-E", "-l", "WARNING", "--without-gossip",
                 "--without-mingle"], env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
    return procs


def run_turn(sender: Celery, r: redis.Redis, turn: str, sentences: list[list[int]],
             timeout: float = 60.0, pieces: list[str] | None = None,
             pause_s: float = 0.0) -> None:
    """Send a floor turn and read its stream until every sentence ended (``pieces``: the
    sentences' texts, for the floor with the providers' streams, read with ``pause_s``)."""
    if pieces is None:
        sender.send_task("voxqueue.agent.floor_turn", args=[turn, sentences], queue="agent")
    else:
        sender.send_task("voxqueue.agent.floor_turn_read",
                         args=[turn, pieces, sentences, pause_s], queue="agent")
    ended, last, deadline = 0, "0", time.time() + timeout
    while ended < len(sentences):
        if time.time() > deadline:
            raise TimeoutError(f"floor turn {turn} did not finish")
        for _, entries in r.xread({f"floor:{turn}": last}, block=1000) or []:
            for entry_id, fields in entries:
                last = entry_id
                ended += b"end" in fields
    r.delete(f"floor:{turn}")


def sender_for(redis_url: str) -> Any:
    sender = Celery("bench-cpu-floor-client")
    sender.conf.update(celery_config(Settings(redis=RedisSettings(url=redis_url))))
    return sender
