"""The housekeeping loop: fires due timers and ends overdue turns, without a task per second.

Every worker process, whatever queues it consumes, runs the loop in a thread; one at a time
does the work, holding a turn in Redis (as the broker's sweeper does,
:func:`voxqueue.broker.sweeps.hold_sweep_turn_in`), so any worker layout fires timers and ends
overdue turns. The holder sleeps on Redis (``BLPOP`` of a wake list) until the soonest of the
next timer's due time, the nearest turn deadline and ``MAX_WAIT_S``, and renews its turn each
round; adding a timer, or a turn due within ``MAX_WAIT_S``, pushes onto the wake list, so one
set while the loop sleeps is still handled on time. The others wait on a hand-off list, trying
for the turn every ``MAX_WAIT_S``: a holder that stops cleanly hands it over at once, one that
dies loses it ``MAX_WAIT_S + HOLD_MARGIN_S`` after its last round. Nothing here is a Celery
task: it sends no message, no task event, and Flower's task list holds only the turns and the
monitors a user scheduled.

The turn saves work, it is not needed for correctness: two loops at once (a round longer than
the margin) claim each timer once (one script) and end a turn once. A Redis outage pauses the
loop; it catches up when Redis is back.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from celery.signals import worker_ready, worker_shutdown

from voxqueue.broker.sweeps import hold_sweep_turn_in, release_sweep_turn
from voxqueue.turns import HOUSEKEEPING_SLEEP_S, TurnStore
from workers.housekeeping.due_timers import fire_due
from workers.housekeeping.sweep import end_overdue
from workers.tool_registry.timer_store import TimerStore

if TYPE_CHECKING:
    from celery import Celery

    from workers.runtime.resources import Runtime

log = structlog.get_logger("voxqueue.monitor")

#: Longest sleep (a turn due sooner than this wakes the loop as it begins, as a timer does).
MAX_WAIT_S = HOUSEKEEPING_SLEEP_S
#: Shortest blocking wait worth a round trip.
MIN_WAIT_S = 0.01
#: Pause after a failed round (Redis away).
RETRY_S = 1.0
#: The turn outlasts the holder's longest sleep by this (a round's own time).
HOLD_MARGIN_S = 1.5



class Housekeeper:
    """The loop of one process (see the module's doc)."""

    def __init__(self, store: TurnStore, *, max_wait_s: float = MAX_WAIT_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        """Wall clock (epoch seconds) that due times and deadlines are compared with."""
        self.r, self.keys = store.r, store.keys
        self.timers = TimerStore(store.r, store.keys)
        self.max_wait_s = max_wait_s
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.turn = store.keys.housekeeping_turn()  # (one per key prefix)
        self.holds = False
        """Whether this loop held the turn at its last try."""
        self.looks = 0
        """How many times this loop has tried for the turn (and, holding it, done a round)
        before going to sleep; tests wait on it."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="voxqueue-housekeeping",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop, handing the turn to a waiting process at once if this one holds it."""
        self._stop.set()
        self.holds = False
        try:
            if release_sweep_turn(self.r, self.turn, self.holder):
                pipe = self.r.pipeline(transaction=False)
                pipe.lpush(self.keys.housekeeping_handoff(), b"1")
                pipe.ltrim(self.keys.housekeeping_handoff(), 0, 0)
                # This loop's own sleep (the holder's) ends too: it sees the stop at once.
                pipe.lpush(self.keys.timers_wake(), b"1")
                pipe.ltrim(self.keys.timers_wake(), 0, 0)
                pipe.execute()
        except Exception as exc:  # Redis away: the turn lapses by itself
            log.warning("housekeeping turn not handed over", error=str(exc))

    def hold_turn(self) -> bool:
        """Take the turn if free, renew it if this loop's; whether it holds it."""
        self.holds = bool(hold_sweep_turn_in(self.r, self.turn, self.holder,
                                             self.max_wait_s + HOLD_MARGIN_S))
        return self.holds

    def round(self) -> float:
        """Fire what is due, end what is overdue; returns how long to sleep until the next."""
        timer_at, deadline = self._soonest()
        now = self.clock()
        timers_due = timer_at is not None and timer_at <= now
        turns_due = deadline is not None and deadline <= now
        if timers_due:
            fire_due(self.timers, now)
        if turns_due:
            end_overdue(self.store, now)
        if timers_due or turns_due:  # (more than one round's worth may have been due)
            timer_at, deadline = self._soonest()
        now = self.clock()
        wake_at = min(t for t in (now + self.max_wait_s, timer_at, deadline) if t is not None)
        return max(0.0, wake_at - now)

    def _soonest(self) -> tuple[float | None, float | None]:
        """The next timer's due time and the nearest turn deadline (None: there is none)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zrange(self.keys.timers_due(), 0, 0, withscores=True)
        pipe.zrange(self.keys.active_turns(), 0, 0, withscores=True)
        timers, turns = pipe.execute()
        return (float(timers[0][1]) if timers else None, float(turns[0][1]) if turns else None)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                held = self.hold_turn()
                wait = self.round() if held else 0.0
                self.looks += 1
                if not held:
                    self.r.blpop([self.keys.housekeeping_handoff()], timeout=self.max_wait_s)
                    continue
                if wait >= MIN_WAIT_S:
                    # Returns early when a timer is added (``TimerStore.new`` pushes a wake).
                    self.r.blpop([self.keys.timers_wake()], timeout=wait)
            except Exception as exc:  # Redis away: try again, catch up when it is back
                log.warning("housekeeping round failed", error=str(exc))
                self._stop.wait(RETRY_S)


def install(app: Celery, runtime: Callable[[], Runtime]) -> None:
    """Run the loop in every worker process (one at a time does the work, see the module's
    doc), from the moment it is ready until it shuts down."""
    running: list[Housekeeper] = []

    def start(**_: Any) -> None:
        rt = runtime()
        keeper = Housekeeper(rt.store)
        keeper.start()
        running.append(keeper)
        log.info("housekeeping loop started", max_wait_s=keeper.max_wait_s,
                 turn=keeper.turn, holder=keeper.holder)

    def stop(**_: Any) -> None:
        while running:
            running.pop().stop()

    worker_ready.connect(start, weak=False)
    worker_shutdown.connect(stop, weak=False)
