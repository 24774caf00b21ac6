"""One child process of the supervisor: started in a session of its own that the kernel kills
with this process (Linux), its output to a log file, the terminal or nowhere; stopped with its
whole process group."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass
class Proc:
    """A child process, and what it takes to start it again."""

    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    inherit_output: bool = False
    started: float = field(default_factory=time.monotonic)
    restarts: int = 0
    """How many times it was started again after dying."""
    failures: int = 0
    """Deaths in a row, each after less than a stable run: sets the next restart delay."""
    restart_at: float | None = None
    """When it is due to start again (``time.monotonic``), while it is dead; else None."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return fn


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` by which the kernel SIGKILLs the child when this process dies (Linux;
    None elsewhere).

    The signal follows the *thread* that forks: start children from a thread that lives as long
    as the supervisor (the main thread). Celery's prefork pool processes set the same towards
    their worker, so a killed supervisor leaves no grandchild behind either.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl: nothing would stop us
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def spawn(name: str, argv: list[str], env: dict[str, str], *, inherit_output: bool,
          log_dir: Path | None) -> tuple[subprocess.Popen[bytes], Path | None]:
    """Start ``argv`` in a new session, output to the terminal (``inherit_output``), else to
    ``log_dir/NAME.log``, else nowhere; the process and its log file."""
    log_path = None
    if inherit_output:
        stdout: Any = None
    elif log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}.log"
        stdout = log_path.open("ab")
    else:
        stdout = subprocess.DEVNULL
    try:
        popen = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=die_with_parent())
    finally:
        if log_path is not None:
            stdout.close()  # the child has its own descriptor
    return popen, log_path


def start_child(name: str, argv: list[str], env: dict[str, str], *, inherit_output: bool,
                log_dir: Path | None) -> Proc:
    """A new :class:`Proc` (see :func:`spawn`)."""
    popen, log_path = spawn(name, argv, env, inherit_output=inherit_output, log_dir=log_dir)
    return Proc(name, argv, popen, log_path, env=env, inherit_output=inherit_output)


def kill_group(pgid: int) -> None:
    """SIGKILL a child's process group (its session), if anything is left in it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def terminate(procs: list[Proc], timeout: float) -> None:
    """SIGTERM each child's process group, SIGKILL what is left after ``timeout``."""
    for proc in procs:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc.popen.pid)
            proc.popen.wait(5)
        kill_group(proc.popen.pid)  # anything it started and left behind
