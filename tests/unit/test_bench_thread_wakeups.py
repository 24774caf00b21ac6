"""The per-thread counters of ``bench.thread_wakeups``: a thread's waits are its own."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from bench.thread_wakeups import kind, thread_counters


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")
def test_a_thread_that_sleeps_counts_its_waits_and_not_the_main_threads():
    napped, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def nap() -> None:
        tid.append(threading.get_native_id())
        for _ in range(20):
            time.sleep(0.002)
        napped.set()
        done.wait()

    before = thread_counters(os.getpid())
    thread = threading.Thread(target=nap)
    thread.start()
    napped.wait()
    after = thread_counters(os.getpid())
    done.set()
    thread.join()
    assert tid[0] not in before  # a thread started meanwhile is counted from nothing
    assert after[tid[0]][1] >= 20  # its voluntary switches: one per sleep at least
    main = os.getpid()
    assert after[main][1] - before[main][1] < 20  # the main thread mostly waited once


def test_kinds_of_thread():
    assert kind(None, is_main=True) == "main"
    assert kind("ThreadPoolExecutor-0_12", is_main=False) == "pool"
    assert kind("voxqueue-lease", is_main=False) == "voxqueue-lease"
    assert kind("Thread-7", is_main=False) == "Thread"
    assert kind(None, is_main=False) == "other"
