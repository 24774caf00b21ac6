"""The benchmark's count of wake-ups: every time a process's threads gave up the CPU."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from bench.harness import context_switches


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")
def test_each_sleep_of_any_thread_counts_as_a_wake_up():
    napped, done = threading.Event(), threading.Event()

    def nap() -> None:
        for _ in range(20):
            time.sleep(0.002)
        napped.set()
        done.wait()  # a thread's count leaves with it: it must be there to be counted

    thread = threading.Thread(target=nap)  # the count covers every thread, not only the main one
    before = context_switches(os.getpid())
    thread.start()
    napped.wait()
    after = context_switches(os.getpid())
    done.set()
    thread.join()
    assert after - before >= 20


def test_a_process_that_is_gone_counts_none():
    assert context_switches(2**22 + 12345) == 0
