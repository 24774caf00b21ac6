"""The CPU floor of a turn: a bare Celery chain with a turn's hops, relaying its audio bytes.

One ``floor_turn`` task on the ``agent`` queue (the agent's step) sends one ``floor_speak`` task
per sentence to ``tts``; each appends the sentence's audio to the turn's stream in the same
chunks as the real turn (random bytes of the same sizes) and an end marker; the client reads the
stream until every sentence has ended. The workers run voxqueue's Celery settings and default
pools and processes, on the same Redis, so the difference from a real turn is our own work.

    celery -A bench.cpu_floor worker -Q agent|tts   (started by ``start_workers``)
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from voxqueue.celery_config import celery_config
from voxqueue.process_table import DEFAULT_POOLS, DEFAULT_PROCESSES
from voxqueue.settings import Settings

app = Celery("bench-cpu-floor")
app.conf.update(celery_config(Settings(_env_file=None)))  # type: ignore[call-arg]


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


def start_workers(redis_url: str, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    """The floor's worker processes: as many per queue, and the same pools, as ours."""
    env = {**os.environ, "VOXQUEUE_REDIS_URL": redis_url,
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
             timeout: float = 60.0) -> None:
    """Send a floor turn and read its stream until every sentence ended."""
    sender.send_task("voxqueue.agent.floor_turn", args=[turn, sentences], queue="agent")
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
    sender.conf.update(celery_config(Settings(_env_file=None, redis_url=redis_url)))  # type: ignore[call-arg]
    return sender
