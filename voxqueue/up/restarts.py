"""Restarting children that die, with backoff: when each starts again, and the line that tells
it."""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from voxqueue.up.child_process import Proc, kill_group, spawn


@dataclass(frozen=True)
class RestartPolicy:
    """When ``Supervisor.supervise_once`` starts a dead child again: ``first_s`` after its
    death, doubling for each death in a row up to ``max_s``; a child that had run ``stable_s``
    before dying starts again from ``first_s``.

    The backoff is for crash loops (a bad setting, a missing module: a worker dies within
    seconds of its start). A worker that had started (``stable_s`` is about twice a worker's
    start on a busy machine) and was then killed is not one: as supervisord does after
    ``startsecs``, it starts again at once, however often it is killed."""

    first_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 10.0

    def delay(self, failures: int) -> float:
        """The wait before the restart that follows ``failures`` deaths in a row (≥ 1)."""
        return float(min(self.max_s, self.first_s * 2 ** max(0, failures - 1)))


def describe_exit(code: int) -> str:
    """A return code as people read it: ``-9`` → ``signal SIGKILL``, ``1`` → ``code 1``."""
    if code >= 0:
        return f"code {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


def log_to_stderr(message: str) -> None:
    """The supervisor's default log: one timestamped line on standard error."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def schedule_restart(proc: Proc, now: float, policy: RestartPolicy) -> str:
    """Note that ``proc`` died: kill what it left behind and set when it starts again. The
    line that tells it."""
    ran = now - proc.started
    kill_group(proc.popen.pid)  # what it started and left behind
    proc.failures = 1 if ran >= policy.stable_s else proc.failures + 1
    delay = policy.delay(proc.failures)
    proc.restart_at = now + delay
    return (f"{proc.name} (pid {proc.popen.pid}) exited with "
            f"{describe_exit(proc.popen.returncode)} after {ran:.1f} s; restart "
            f"#{proc.restarts + 1} in {delay:g} s")


def respawn(proc: Proc, now: float, policy: RestartPolicy, log_dir: Path | None) -> str:
    """Start the dead ``proc`` again (or, when it cannot start, set the next try). The line
    that tells it."""
    try:
        proc.popen, proc.log_path = spawn(proc.name, proc.argv, proc.env,
                                          inherit_output=proc.inherit_output, log_dir=log_dir)
    except OSError as exc:
        proc.failures += 1
        delay = policy.delay(proc.failures)
        proc.restart_at = now + delay
        return f"{proc.name} could not start again: {exc}; next try in {delay:g} s"
    proc.started, proc.restart_at = now, None
    proc.restarts += 1
    return f"{proc.name} started again (pid {proc.popen.pid}, restart #{proc.restarts})"
