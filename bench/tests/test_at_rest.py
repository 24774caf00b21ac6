"""``bench.at_rest``'s instruments: a process's role from its command line, its memory, and idle
CPU from its threads' exact times."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import at_rest


def test_roles_are_read_from_command_lines() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-n",
                               "tts-2@host", "beat"])
    try:
        time.sleep(0.2)
        assert at_rest.role_of(worker.pid) == "worker tts-2"
        assert worker.pid in at_rest.children_of(os.getpid())
    finally:
        worker.kill()
        worker.wait()


def test_memory_adds_up_and_busy_threads_count() -> None:
    mine = at_rest.memory_of(os.getpid())
    assert 0 < mine.uss_mb <= mine.pss_mb <= mine.rss_mb
    before = at_rest.thread_cpu_ns(os.getpid())
    give_up = time.process_time() + 0.05
    while time.process_time() < give_up:  # 50 ms of CPU
        pass
    used = at_rest.idle_ms_per_s(before, at_rest.thread_cpu_ns(os.getpid()), 1.0)
    assert 45 <= used < 500
    total = at_rest.totals({"a": mine, "b": mine})
    assert total.rss_mb == 2 * mine.rss_mb
