"""Leases: a live worker keeps the tasks it holds; a dead worker's tasks run again in seconds.

kombu's Redis transport keeps every delivered, unacknowledged message in the ``unacked`` hash,
with its delivery time in the ``unacked_index`` sorted set; each ``unacked_restore_interval``
one worker process (``voxqueue.broker.transport.QoS``) sweeps that index and puts back in its queue
whatever is older than the ``visibility_timeout``. With a short visibility timeout (the lease,
a few seconds) that sweep would hand out running tasks too, so each worker process renews what
it holds: every quarter lease it re-scores its own deliveries (``ZADD unacked_index XX now
tag``). A worker that dies, in any pool, stops renewing, and its tasks are back in their queue
one lease later. Every score, and the sweep's threshold, is Redis's time (``TIME`` inside the
scripts of :mod:`voxqueue.broker.sweeps`), so hosts' clocks need not agree.

A task past its hard time limit loses its lease as well: the threads pool cannot stop a
thread, so the task is handed to another worker, and the stuck one is fenced (its writes are
dropped, see :mod:`voxqueue.once`). At the soft limit the stuck thread first gets
``SoftTimeLimitExceeded`` raised in it, as the prefork pool would do.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
import structlog
from celery.exceptions import SoftTimeLimitExceeded

from voxqueue.broker.sweeps import stamp_leases

log = structlog.get_logger("voxqueue.lease")


@dataclass
class Running:
    """A task running in a thread of this process."""

    tag: str | None
    thread_id: int
    started: float
    soft_limit: float | None
    hard_limit: float | None
    interrupted: bool = False


class LeaseKeeper:
    """One thread per worker process renewing the leases of every message the process holds."""

    def __init__(self, consumer: Any, r: redis.Redis, lease_s: float,
                 enforce_limits: bool, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.consumer = consumer
        self.clock = clock
        """What tasks' time limits are measured on (leases are on Redis's clock)."""
        self.r = r
        self.lease_s = lease_s
        self.enforce_limits = enforce_limits  # threads pool: nobody else enforces them
        self.running: dict[str, Running] = {}
        self._stop = threading.Event()
        self._received = threading.Event()  # set when a task arrives: the loop has work
        self._thread = threading.Thread(target=self._loop, name="voxqueue-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._received.set()

    def task_received(self) -> None:
        """A task was delivered to this process (Celery's ``task_received``, in the consumer):
        wakes the loop if it sleeps for want of anything to renew."""
        self._received.set()

    # -- tasks of this process (threads pool) -------------------------------------------------
    def task_started(self, task_id: str, tag: str | None, soft: float | None,
                     hard: float | None) -> None:
        self.running[task_id] = Running(tag, threading.get_ident(), self.clock(), soft, hard)

    def task_ended(self, task_id: str) -> None:
        self.running.pop(task_id, None)

    # -- renewing ----------------------------------------------------------------------------
    def _loop(self) -> None:
        """Every quarter lease while the process holds a task; asleep while it holds none (an
        idle worker's wake-ups are its cost), until one is received."""
        while not self._stop.is_set():
            self._received.clear()  # before looking: a task received after this wakes the wait
            if not self.running and not self.held_tags():
                self._received.wait()
                continue
            if self._stop.wait(self.lease_s / 4):
                return
            try:
                self.renew()
            except Exception as exc:  # Redis away: the lease runs out, as it must
                log.warning("lease renewal failed", error=str(exc))

    def held_tags(self) -> list[str]:
        """Delivery tags of every message this process holds unacknowledged (queued, running
        or waiting for a countdown)."""
        task_consumer = getattr(self.consumer, "task_consumer", None)
        channel = getattr(task_consumer, "channel", None)
        qos = getattr(channel, "qos", None)
        delivered = getattr(qos, "_delivered", None)
        if not delivered:
            return []
        for _ in range(3):
            try:
                return [str(tag) for tag in list(delivered)]
            except RuntimeError:  # changed while copied: try again
                continue
        return []

    def renew(self) -> int:
        """Re-score every held delivery that is still within its time limit; returns how many."""
        expired = self._enforce_limits() if self.enforce_limits else set()
        tags = [t for t in self.held_tags() if t not in expired]
        if not tags:
            return 0
        # One script for them all, on Redis's clock (never this host's: see the module's doc);
        # XX: a delivery acked meanwhile is not put back.
        stamp_leases(self.r, self._index_key(), tags, renew=True)
        return len(tags)

    def _index_key(self) -> str:
        channel = self.consumer.task_consumer.channel
        prefix = getattr(channel, "global_keyprefix", "") or ""
        return f"{prefix}{channel.unacked_index_key}"

    def _enforce_limits(self) -> set[str]:
        """Interrupt tasks past their soft limit; return the tags of those past the hard one."""
        now = self.clock()
        expired: set[str] = set()
        for task_id, run in list(self.running.items()):
            elapsed = now - run.started
            if run.soft_limit and elapsed > run.soft_limit and not run.interrupted:
                run.interrupted = True
                log.warning("task passed its soft time limit", task_id=task_id,
                            seconds=round(elapsed, 1))
                _raise_in_thread(run.thread_id, SoftTimeLimitExceeded)
            if run.hard_limit and elapsed > run.hard_limit and run.tag is not None:
                expired.add(run.tag)
        return expired


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in another thread at its next Python instruction (blocking calls return
    first: every provider call here has a timeout)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
