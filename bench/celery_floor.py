"""The floor of a queue hop here: a bare Celery task with voxqueue's Celery settings.

    .venv/bin/python -m bench.celery_floor [--hops 200]

The worker runs ``celery -A bench.celery_floor worker`` (threads, events on, like ours); the
task only records how long after its sending it started. ``bench.latency`` prints this beside
voxqueue's own hop, measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from voxqueue.celery_config import celery_config
from voxqueue.settings import RedisSettings, Settings, ignore_dotenv

QUEUE = "agent"  # one of the configured queues; a private Redis, so nothing else is on it
RESULTS = "bench:floor:hops"

ignore_dotenv()  # a benchmark reads what it sets, never a .env file
app = Celery("bench-floor")
app.conf.update(celery_config(Settings()))


@functools.cache
def _results() -> redis.Redis:
    """One client per worker process for the recorded hops."""
    return redis.Redis.from_url(app.conf.broker_url)


@app.task(name="voxqueue.agent.floor")
def floor(sent_at: float) -> None:
    """Record enqueued → started, in milliseconds."""
    started = time.time()
    _results().rpush(RESULTS, (started - sent_at) * 1000)


def measure(redis_url: str, n: int = 200, log_dir: Path | None = None) -> list[float]:
    """Start a floor worker on ``redis_url``, send ``n`` tasks one at a time, return the hops."""
    env = {**os.environ, "VOXQUEUE_REDIS_URL": redis_url,
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    out: Any = (log_dir / "floor.log").open("ab") if log_dir else subprocess.DEVNULL
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bench.celery_floor", "worker", "-Q", QUEUE,
         "-n", "floor@%h", "-P", "threads", "-c", "32", "--prefetch-multiplier", "1", "-E",
         "-l", "WARNING", "--without-gossip", "--without-mingle"],
        env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    r = redis.Redis.from_url(redis_url)
    sender = Celery("bench-floor-client")
    sender.conf.update(celery_config(Settings(redis=RedisSettings(url=redis_url))))
    try:
        r.delete(RESULTS)
        _send_and_wait(sender, r, 5, timeout=60)  # the worker's start-up and warm-up
        r.delete(RESULTS)
        _send_and_wait(sender, r, n, timeout=120)
        return [float(x) for x in r.lrange(RESULTS, 0, -1)]
    finally:
        worker.terminate()
        worker.wait(15)


def _send_and_wait(sender: Celery, r: redis.Redis, n: int, timeout: float) -> None:
    for i in range(n):
        sender.send_task("voxqueue.agent.floor", args=[time.time()], queue=QUEUE)
        deadline = time.time() + timeout
        while r.llen(RESULTS) <= i:
            if time.time() > deadline:
                raise TimeoutError("the floor worker did not run its task")
            time.sleep(0.002)
        time.sleep(0.02)  # one task at a time, like a turn's hops


def measure_on_own_redis(n: int = 200) -> list[float]:
    """``measure`` on a private Redis started for it."""
    from testkit import RedisServer

    server = RedisServer()
    server.start()
    try:
        return measure(server.url, n)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hops", type=int, default=200)
    hops = measure_on_own_redis(parser.parse_args().hops)
    print(f"bare Celery hop p50 {statistics.median(hops):.2f} ms over {len(hops)}")


if __name__ == "__main__":
    main()
