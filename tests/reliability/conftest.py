"""Fixtures of the reliability suite: the table's rows, and private systems with odd settings.

Every test takes ``reliability_case("what was tried")`` for each row it adds to the report
(``$VOXQUEUE_RELIABILITY_REPORT``, else ``reliability.jsonl`` in pytest's tmp dir);
``python -m tests.reliability.table`` turns the rows into the table of docs/reliability.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import System
from tests.reliability.ledger import Case, append_row, report_path

#: The queues a private system's single worker consumes ("monitor" runs beat's sweeper).
WORK_QUEUES = ("stt", "agent", "tools", "tts", "monitor")

_OUTCOME = pytest.StashKey[str]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and not report.passed):
        item.stash[_OUTCOME] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    if report.when == "call" and report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, System) and name != "system":
                report.sections.append((f"logs of {name}", value.logs()))


@pytest.fixture
def reliability_case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Case]]:
    """A factory of report rows; each row is written when the test ends, with its outcome."""
    made: list[Case] = []

    def make(name: str) -> Case:
        made.append(Case(name))
        return made[-1]

    yield make
    outcome = request.node.stash.get(_OUTCOME, "error")
    path = report_path(tmp_path_factory.getbasetemp())
    for case in made:
        append_row(path, case.row(outcome))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    path = report_path(factory.getbasetemp())
    if path.exists():
        terminalreporter.write_line(f"reliability report: {path}")


@contextmanager
def running_system(
    env: dict[str, str],
    log_dir: Path,
    *,
    queues: Sequence[str] = WORK_QUEUES,
    beat: bool = True,
    concurrency: int = 8,
    loglevel: str = "INFO",
) -> Iterator[System]:
    """One worker process for ``queues`` (and beat, for the deadline sweeper); stopped on exit."""
    system = System(env, log_dir, beat=False)
    try:
        system.sup.start(
            "worker-all",
            system.sup.worker_argv(queues, name="all", concurrency=concurrency, loglevel=loglevel),
        )
        if beat:
            system.sup.start("beat", system.sup.beat_argv(loglevel=loglevel))
        system.sup.wait_for_workers(queues)
        yield system
    finally:
        system.stop()


def db_url(redis_url: str, db: int) -> str:
    """The URL of another database on the same server (reliability tests use 11 to 14)."""
    base, _, _ = redis_url.rpartition("/")
    return f"{base}/{db}"


def assert_workers_alive(system: System) -> None:
    dead = [(p.name, p.popen.returncode) for p in system.sup.procs if p.popen.poll() is not None]
    assert not dead, f"worker processes exited: {dead}"


def full_logs(system: System) -> str:
    """Everything the system's processes have logged so far (System.logs() keeps only tails)."""
    folder = system.sup.log_dir
    if folder is None:
        return ""
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("*.log")))


def wait_for_logs(system: System, *needles: str, timeout: float = 15.0) -> str:
    """The logs once they hold every needle; an AssertionError naming the missing ones if not."""
    give_up = time.monotonic() + timeout
    while True:
        text = full_logs(system)
        missing = [n for n in needles if n not in text]
        if not missing:
            return text
        if time.monotonic() > give_up:
            raise AssertionError(f"not in the worker logs after {timeout} s: {missing}")
        time.sleep(0.2)
