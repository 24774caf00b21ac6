"""A worker process's short timers, on one thread: a ``threading.Timer`` per timer costs a
thread's creation and its start-up hand-over each time (the agent set one for about every
turn, to send gathered sentences when the listener's audio runs low).

Callbacks run one after another on that thread, in the context they were set in, so they must
be short (sending a job is); one that raises is logged and the others still run.

Not Celery's ``celery.utils.timer2.Timer``: with nothing due it wakes every second, and it
sleeps through a sooner timer set meanwhile (up to its two-second interval); this thread sleeps
until the next timer is due and is woken only by a sooner one.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("voxqueue.timers")


class Timers:
    """Runs callbacks after a delay, on one daemon thread started on first use."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, Callable[[], object]]] = []
        self._cancelled: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def call_later(self, delay: float, fn: Callable[[], object]) -> Callable[[], None]:
        """Run ``fn`` in the current context after ``delay`` seconds; returns what cancels it
        (cancelling a timer that ran or was cancelled does nothing)."""
        run = contextvars.copy_context().run
        with self._cond:
            if self._pid != os.getpid():  # a forked child: the thread stayed in the parent
                self._due, self._cancelled, self._thread = [], set(), None
                self._pid = os.getpid()
            ident = next(self._ids)
            heapq.heappush(self._due, (self._clock() + delay, ident, lambda: run(fn)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="voxqueue-timers",
                                                daemon=True)
                self._thread.start()
            elif self._due[0][1] == ident:  # sooner than the one the thread waits for
                self._cond.notify()
        return lambda: self._cancel(ident)

    def pending(self) -> int:
        """Timers set and neither run nor cancelled."""
        with self._cond:
            return sum(1 for _, ident, _ in self._due if ident not in self._cancelled)

    def _cancel(self, ident: int) -> None:
        with self._cond:
            if any(i == ident for _, i, _ in self._due):
                self._cancelled.add(ident)  # dropped when due, without waking the thread

    def _next(self) -> Callable[[], object]:
        """Wait for the next timer due that was not cancelled, and take it."""
        with self._cond:
            while True:
                while self._due and self._due[0][1] in self._cancelled:
                    self._cancelled.discard(heapq.heappop(self._due)[1])
                if not self._due:
                    self._cond.wait()
                    continue
                wait = self._due[0][0] - self._clock()
                if wait <= 0:
                    return heapq.heappop(self._due)[2]
                self._cond.wait(wait)

    def _run(self) -> None:
        while True:
            fn = self._next()
            try:
                fn()
            except Exception:
                log.exception("a timer's callback failed")
