"""A clock that moves only when a test moves it, for code that takes a ``clock`` (a
``Callable[[], float]`` defaulting to ``time.time`` or ``time.monotonic``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class FakeClock:
    """Reads ``now`` until :meth:`advance` moves it; notes which threads read it."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self._read = threading.Condition()
        self._readers: list[str] = []

    def __call__(self) -> float:
        with self._read:
            self._readers.append(threading.current_thread().name)
            self._read.notify_all()
            return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait_read_by(self, thread_name: str, times: int = 1, timeout: float = 10.0) -> bool:
        """Wait until the thread called ``thread_name`` has read the clock ``times`` times;
        whether it had by ``timeout``."""
        with self._read:
            return self._read.wait_for(lambda: self._readers.count(thread_name) >= times,
                                       timeout)


def wait_until(check: Callable[[], T | None], what: str, timeout: float = 10.0,
               every: float = 0.02) -> T:
    """Poll ``check`` until it returns something truthy, and return that; fail with ``what``
    if it has not by ``timeout`` seconds (a deadline for an event, never a measure of speed)."""
    give_up = time.monotonic() + timeout
    while not (got := check()):
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)
    return got
