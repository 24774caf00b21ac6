"""The process's short timers: one thread runs them all, in order, in their setter's context."""

from __future__ import annotations

import contextvars
import threading
import time

from testkit.clock import FakeClock
from workers.runtime.delayed_calls import Timers

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_timers_run_in_order_on_one_thread_in_the_context_they_were_set_in() -> None:
    timers = Timers()
    ran: list[tuple[str, str, int]] = []
    done = threading.Event()

    def note(name: str) -> None:
        ran.append((name, WHO.get(), threading.get_ident()))
        if len(ran) == 3:
            done.set()

    for name, delay in (("late", 0.3), ("soon", 0.05), ("middle", 0.15)):
        WHO.set(f"step {name}")
        timers.call_later(delay, lambda n=name: note(n))
    threads_before = threading.active_count()
    assert done.wait(3)
    assert [(n, who) for n, who, _ in ran] == [("soon", "step soon"), ("middle", "step middle"),
                                               ("late", "step late")]
    assert len({ident for *_, ident in ran}) == 1  # one thread for all
    assert threading.active_count() == threads_before  # none started per timer
    assert timers.pending() == 0


def test_a_cancelled_timer_does_not_run_and_a_failing_one_does_not_stop_the_rest() -> None:
    timers = Timers()
    ran: list[str] = []
    cancel = timers.call_later(0.05, lambda: ran.append("cancelled"))
    timers.call_later(0.06, lambda: 1 / 0)
    timers.call_later(0.1, lambda: ran.append("after the failure"))
    cancel()
    assert timers.pending() == 2
    deadline = time.monotonic() + 3
    while not ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == ["after the failure"]
    cancel()  # cancelling again, once gone, does nothing
    assert timers.pending() == 0


def test_a_sooner_timer_set_while_the_thread_waits_runs_on_time() -> None:
    clock = FakeClock()
    timers = Timers(clock)
    fired = threading.Event()
    timers.call_later(30, lambda: None)
    # The thread reads the clock holding the timers' lock, and lets go of it only to wait: once
    # it has read it and the lock is free, it waits (up to 30 s) for the first timer.
    assert clock.wait_read_by("voxqueue-timers")
    with timers._cond:
        timers.call_later(0, fired.set)  # due now: the waiting thread must be woken for it
    # Unwoken, it would run only after its 30 s wait: 10 s is a deadline, not a speed.
    assert fired.wait(10), "the waiting thread was not woken by a sooner timer"
    assert timers.pending() == 1, "the 30 s timer is still to come on the fake clock"
