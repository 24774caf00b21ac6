"""What ``voxqueue doctor`` knows of a running ``voxqueue up``: the processes its supervisor
listed that are still its children, with their memory read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from voxqueue.up.running import (
    SUPERVISOR,
    memory_of,
    remove_running,
    up_processes,
    write_running,
)


def test_the_listed_children_with_their_memory_and_no_stranger(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); "
                              "time.sleep(60)"], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline()  # an interpreter, loaded
    stranger = os.getppid()  # alive, but no child of this process
    path = tmp_path / "up.json"
    try:
        write_running(path, os.getpid(), [("worker-all", child.pid), ("flower", stranger)])
        found = up_processes(path)
    finally:
        child.kill()
        child.wait()
    assert found.problem == ""
    assert [(p.name, p.pid) for p in found.processes] == [
        (SUPERVISOR, os.getpid()), ("worker-all", child.pid)]
    for p in found.processes:
        assert p.memory.rss > 1 << 20 and p.memory.pss is not None and p.memory.uss is not None
        assert p.memory.uss <= p.memory.pss <= p.memory.rss
    assert found.total().rss == sum(p.memory.rss for p in found.processes)


def test_no_up_running_is_said_not_failed(tmp_path: Path) -> None:
    path = tmp_path / "up.json"
    assert "absent" in up_processes(path).problem
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    write_running(path, int(finished.stdout), [])
    assert "is gone" in up_processes(path).problem
    remove_running(path)
    assert not path.exists() and up_processes(path).processes == []


def test_memory_of_a_gone_process_is_none() -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    assert memory_of(int(finished.stdout)) is None
    assert memory_of(os.getpid()) is not None
