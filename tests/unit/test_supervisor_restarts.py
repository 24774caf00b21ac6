"""The supervisor keeps its children running: a child that dies is started again with backoff,
the others keep running, and nothing is started again once it stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from testkit.clock import FakeClock
from voxqueue.settings import Settings
from voxqueue.up.child_process import Proc
from voxqueue.up.restarts import RestartPolicy, describe_exit
from voxqueue.up.supervisor import Supervisor


def sleeper(marker: str) -> list[str]:
    """A child that sleeps for a minute, findable by ``marker`` on its command line."""
    return [sys.executable, "-c", f"import time; time.sleep(60)  # {marker}"]


def running(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def supervise_until(sup: Supervisor, proc: Proc, restarts: int, timeout: float = 10.0) -> float:
    """Call ``supervise_once`` until ``proc`` was started again ``restarts`` times; the
    seconds it took."""
    began = time.monotonic()
    while proc.restarts < restarts:
        assert time.monotonic() - began < timeout, f"{proc.name} was not started again"
        sup.supervise_once()
        time.sleep(0.01)
    return time.monotonic() - began


def kill(proc: Proc) -> int:
    pid = proc.popen.pid
    os.kill(pid, signal.SIGKILL)
    proc.popen.wait(5)
    return pid


@pytest.fixture
def marker() -> str:
    return f"vq-supervisor-test-{uuid.uuid4().hex}"


def test_restart_delays_double_to_their_cap():
    policy = RestartPolicy(first_s=1, max_s=30)
    assert [policy.delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_exit_codes_are_told_as_people_read_them():
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(1) == "code 1"


def test_a_child_that_dies_is_started_again_with_backoff_and_the_others_keep_running(marker):
    said: list[str] = []
    sup = Supervisor(Settings(), restart=RestartPolicy(0.2, 0.8, 30.0),
                     log=said.append)
    try:
        tools = sup.start("tools", sleeper(marker))
        other = sup.start("other", sleeper(marker))
        other_pid = other.popen.pid
        first = kill(tools)
        assert supervise_until(sup, tools, 1) >= 0.2
        assert tools.popen.pid != first and tools.popen.poll() is None
        assert f"tools (pid {first}) exited with signal SIGKILL" in said[0]
        assert "restart #1 in 0.2 s" in said[0]
        assert f"tools started again (pid {tools.popen.pid}, restart #1)" in said[1]
        kill(tools)  # again at once: the delay doubles
        assert supervise_until(sup, tools, 2) >= 0.4
        assert "restart #2 in 0.4 s" in said[2]
        assert other.popen.pid == other_pid and other.popen.poll() is None
        assert sorted(running(marker)) == sorted([tools.popen.pid, other_pid])
    finally:
        sup.stop_all()
    assert running(marker) == []


def test_a_child_that_ran_stably_starts_again_from_the_first_delay(marker):
    said: list[str] = []
    clock = FakeClock()
    sup = Supervisor(Settings(), restart=RestartPolicy(0.1, 5.0, 0.5),
                     log=said.append, clock=clock)
    try:
        proc = sup.start("flaky", sleeper(marker))
        for restarts, delay in ((1, 0.1), (2, 0.2), (3, 0.4)):  # dying at once: backing off
            kill(proc)
            sup.supervise_once()
            assert said[-1].endswith(f"restart #{restarts} in {delay:g} s"), said[-1]
            clock.advance(delay - 0.01)
            sup.supervise_once()
            assert proc.restarts == restarts - 1, "started again before its delay"
            clock.advance(0.01)
            sup.supervise_once()
            assert proc.restarts == restarts
        clock.advance(0.6)  # a stable run
        kill(proc)
        sup.supervise_once()
        assert said[-1].endswith("restart #4 in 0.1 s"), said[-1]
    finally:
        sup.stop_all()


def test_nothing_is_started_again_once_stopping(marker):
    clock = FakeClock()
    sup = Supervisor(Settings(), restart=RestartPolicy(0.1, 0.1, 30.0),
                     log=lambda _: None, clock=clock)
    proc = sup.start("dies", sleeper(marker))
    sup.start("lives", sleeper(marker))
    kill(proc)
    sup.supervise_once()  # its death is noticed, its restart due in 0.1 s
    assert proc.restart_at is not None
    sup.stop_all()
    clock.advance(0.2)  # its restart is due
    sup.supervise_once()
    sup.watch(interval_s=0.01)  # returns at once
    assert proc.restarts == 0 and sup.procs == []
    assert running(marker) == []
