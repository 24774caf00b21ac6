"""The process's short timers: one thread runs them all, in order, in their setter's context."""

from __future__ import annotations

import contextvars
import threading
import time

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
    timers = Timers()
    fired = threading.Event()
    timers.call_later(30, lambda: None)  # the thread now waits up to 30 s
    time.sleep(0.05)
    started = time.monotonic()
    timers.call_later(0.05, fired.set)
    assert fired.wait(3)
    assert time.monotonic() - started < 1.0
