"""Shared fixtures: a real Redis server, the fake cloud providers, real worker processes.

The parts the benchmarks share (the Redis server, the environment, the fakes) are in
``testkit``; their names are importable from here too, as the tests always have."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import ROOT, SPEECH, RedisServer, free_port, system_env

#: Home Assistant's tests run in Home Assistant's own virtualenv (``./vq test --ha``), with their
#: own configuration: never collected here.
collect_ignore = ["homeassistant"]


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


#: Test files that each run a whole system under random kills or failovers for a minute or
#: more: ``./vq test``'s two test processes (pytest-xdist, one file at a time each) never run
#: two of them at once, which on two cores slowed every stage enough for a turn's job to be
#: killed three times (CI, 2026-12-07).
HEAVY_FILES = frozenset({"tests/reliability/test_chaos.py",
                         "tests/reliability/test_redis_failover.py"})


@pytest.hookimpl(optionalhook=True)  # (pytest-xdist's hook: unknown without it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile``, with the heavy files as one unit (one process runs them in turn)."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "heavy" if scope in HEAVY_FILES else scope

    return HeavyFilesTogether(config, log)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def fake_providers() -> Iterator[object]:
    from testkit.fakes import FakeProviders

    with FakeProviders() as fake:
        yield fake


class System:
    """Real worker processes (one per queue) and beat, with a client in the test process."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, beat: bool = True) -> None:
        from voxqueue.settings import RedisSettings, Settings
        from voxqueue.up.supervisor import Supervisor

        self.env = env
        self.settings = Settings(redis=RedisSettings(**self.redis_settings()))
        self.sup = Supervisor(self.settings, env=env, log_dir=log_dir)
        self.beat = beat
        self._client = None

    def start(self, queues: tuple[str, ...] = ("stt", "agent", "tools", "tts", "monitor")) -> None:
        self.sup.start_workers(queues=queues)
        if self.beat:
            self.sup.start("beat", self.sup.beat_argv())
        self.sup.wait_for_workers(queues)

    def redis_settings(self) -> dict[str, str]:
        """The Redis settings that say where it is (a URL; with Sentinel, the primary's name)."""
        out = {"url": self.env["VOXQUEUE_REDIS_URL"]}
        if self.env.get("VOXQUEUE_REDIS_MASTER"):
            out["master"] = self.env["VOXQUEUE_REDIS_MASTER"]
        return out

    def client(self):  # type: ignore[no-untyped-def]
        from voxqueue.client.direct import Client
        from voxqueue.settings import RedisSettings, Settings

        if self._client is None:
            settings = Settings(redis=RedisSettings(**self.redis_settings()))
            self._client = Client(settings)
        return self._client

    def logs(self) -> str:
        parts = []
        for path in sorted((self.sup.log_dir or Path()).glob("*.log")):
            parts.append(f"===== {path.name}\n{path.read_text(errors='replace')[-6000:]}")
        return "\n".join(parts)

    def restart_dead(self) -> None:
        """Start again every worker that died or was killed (as `voxqueue up` or Kubernetes
        would), and wait until they answer."""
        dead = [p for p in self.sup.procs if p.popen.poll() is not None]
        for proc in dead:
            self.sup.procs.remove(proc)
            self.sup.start(proc.name, proc.argv)
        if dead:
            self.sup.wait_for_workers((), names=[p.name.removeprefix("worker-") for p in dead])

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
