"""Starting and stopping the processes of one machine: workers, beat, Flower, embedded Redis.

``voxqueue up`` and the integration tests use the same code, so tests run what users run.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from voxqueue.redis_conn import redact, sentinel_address
from voxqueue.settings import QUEUES, Settings
from voxqueue.up.child_process import Proc, kill_group, start_child, terminate
from voxqueue.up.embedded_redis import (
    EMBEDDED_PORT,
    data_dir,
    embedded_redis_url,
    lock_data_dir,
    redis_answers,
    start_embedded_redis,
)
from voxqueue.up.flower_auth import flower_credentials
from voxqueue.up.process_table import (
    BEAT_SCHEDULER,
    CONTROL_APP,
    DEFAULT_POOLS,
    FLOWER_NO_EVENTS_ASK,
    HEARTBEAT_S,
    SHARED_CONCURRENCY,
    SHARED_WORKER,
    worker_names,
)
from voxqueue.up.restarts import RestartPolicy, log_to_stderr, respawn, schedule_restart
from voxqueue.up.running import remove_running, write_running

#: Longest sleep of ``Supervisor.watch`` with nothing happening (a death wakes it at once).
IDLE_WATCH_S = 5.0


@contextlib.contextmanager
def _woken_by_signals() -> Iterator[int | None]:
    """A descriptor that becomes readable when a signal arrives (``signal.set_wakeup_fd``),
    SIGCHLD among them, for as long as the block runs; None off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    old_handler = signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler: wake-ups)
    try:
        yield read
    finally:
        signal.signal(signal.SIGCHLD, old_handler)
        signal.set_wakeup_fd(old_fd)
        os.close(read)
        os.close(write)


@dataclass
class Supervisor:
    """Runs child processes with one environment; restarts those that die (``watch``); stops
    them all cleanly.

    Every child runs in a session of its own and, on Linux, is killed by the kernel when this
    process dies, however it dies.
    """

    settings: Settings
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    log_dir: Path | None = None
    procs: list[Proc] = field(default_factory=list)
    embedded: Proc | None = None
    """The embedded redis-server that ``ensure_redis`` started, if any."""
    data_lock: IO[str] | None = None
    """The lock on the embedded Redis's data folder, held while it runs."""
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    log: Callable[[str], None] = log_to_stderr
    """Where restarts are told, one line each."""
    stopping: bool = False
    """Set by ``stop_all`` (or a signal handler): no more restarts, ``watch`` returns."""
    clock: Callable[[], float] = field(default=time.monotonic)
    """What children's runs and restart delays are measured on."""
    running_file: Path | None = None
    """Where the running children are listed for ``voxqueue doctor`` (``voxqueue up`` sets it:
    :mod:`voxqueue.up.running`); None: nowhere."""

    # -- Redis ------------------------------------------------------------------------------
    def ensure_redis(self, port: int = EMBEDDED_PORT) -> tuple[str, bool]:
        """The Redis URL to use, starting an embedded server when none answers.

        Returns the URL and whether it is embedded. The embedded server keeps its data in
        :func:`~voxqueue.up.embedded_redis.data_dir`, locked against a second ``up``
        (``DataDirInUse``); it is a child like the others: restarted if it dies, stopped last.
        """
        url = self.settings.redis.url
        if sentinel_address(self.settings) is not None:  # a bad sentinel URL stops here
            return url, False  # never an embedded server in place of a primary that fails over
        if redis_answers(url):
            return url, False
        folder = data_dir(self.settings)
        self.data_lock = lock_data_dir(folder)
        try:
            self.embedded = start_embedded_redis(port, folder, self.settings.redis.appendfsync,
                                                 self.env, self.log_dir)
        except BaseException:
            self.data_lock.close()
            self.data_lock = None
            raise
        url = embedded_redis_url(port)
        self.env["VOXQUEUE_REDIS_URL"] = url
        self.settings = self.settings.replace(redis={"url": url})
        self.record_running()
        return url, True

    # -- processes -------------------------------------------------------------------------
    def worker_argv(self, queues: Iterable[str], *, name: str, pool: str = "threads",
                    concurrency: int = 4, loglevel: str = "INFO") -> list[str]:
        queue_list = list(queues)
        unknown = set(queue_list) - set(QUEUES)
        if unknown:
            raise ValueError(f"unknown queue(s) {sorted(unknown)}; known: {', '.join(QUEUES)}")
        return [sys.executable, "-m", "celery", "-A", "workers", "worker",
                "-Q", ",".join(queue_list), "-n", f"{name}@%h", "-P", pool,
                "-c", str(concurrency), "--prefetch-multiplier", "1", "-E",
                "--heartbeat-interval", str(HEARTBEAT_S), "-l", loglevel,
                "--without-gossip", "--without-mingle"]

    def beat_argv(self, loglevel: str = "INFO") -> list[str]:
        """Beat with its schedule and lock in Redis (celery-redbeat): one runs at a time.

        The ``-s`` file is unused by that scheduler (kept so callers may still set it).
        """
        schedule = Path(tempfile.gettempdir()) / f"voxqueue-beat-{os.getpid()}"
        return [sys.executable, "-m", "celery", "-A", CONTROL_APP, "beat", "-l", loglevel,
                "-S", BEAT_SCHEDULER, "-s", str(schedule)]

    def flower_argv(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", CONTROL_APP, "flower",
                f"--port={self.settings.dashboard.flower_port}", "--address=127.0.0.1",
                "--natural_time=False", f"--max_tasks={self.settings.dashboard.flower_max_tasks}",
                FLOWER_NO_EVENTS_ASK]

    def flower_env(self) -> dict[str, str]:
        """Flower's basic auth (see :func:`voxqueue.up.flower_auth.flower_credentials`), through
        the environment: never on a command line that ``ps`` shows."""
        creds = flower_credentials(self.settings)
        return {"FLOWER_BASIC_AUTH": f"{creds.user}:{creds.password}"}

    def start(self, name: str, argv: list[str], extra_env: Mapping[str, str] | None = None,
              *, inherit_output: bool = False) -> Proc:
        """Start a child (output to ``log_dir/NAME.log``, the terminal, or nowhere)."""
        proc = start_child(name, argv, {**self.env, **(extra_env or {})},
                           inherit_output=inherit_output, log_dir=self.log_dir)
        proc.started = self.clock()
        self.procs.append(proc)
        self.record_running()
        return proc

    def start_workers(self, pools: Mapping[str, tuple[str, int]] | None = None,
                      queues: Iterable[str] = QUEUES,
                      processes: Mapping[str, int] | None = None, **kw: Any) -> list[Proc]:
        """Worker processes for ``queues``: ``processes[q]`` of them (default one) per queue,
        named ``q``, ``q-2``, ``q-3``…"""
        chosen = {**DEFAULT_POOLS, **(pools or {})}
        started = []
        for q in queues:
            pool, concurrency = chosen[q]
            for name in worker_names(q, (processes or {}).get(q, 1)):
                started.append(self.start(f"worker-{name}", self.worker_argv(
                    [q], name=name, pool=pool, concurrency=concurrency), **kw))
        return started

    def start_shared_worker(self, **kw: Any) -> Proc:
        """``voxqueue up``'s default worker: one process consuming every queue
        (``SHARED_WORKER``, ``SHARED_CONCURRENCY`` threads)."""
        return self.start(f"worker-{SHARED_WORKER}", self.worker_argv(
            QUEUES, name=SHARED_WORKER, concurrency=SHARED_CONCURRENCY), **kw)

    def wait_for_workers(self, queues: Iterable[str], timeout: float = 60.0,
                         names: Iterable[str] = ()) -> None:
        """Block until a worker answers a ping on each queue, and every worker named in
        ``names`` (``-n NAME@host``) answers."""

        from voxqueue.celery_config import make_celery

        wanted = set(queues)
        wanted_names = set(names)
        app = make_celery(self.settings, "voxqueue-probe")
        give_up = time.time() + timeout
        try:
            while time.time() < give_up:
                dead = [p for p in self.procs if p.popen.poll() is not None]
                if dead:
                    raise RuntimeError(f"{dead[0].name} exited with {dead[0].popen.returncode}")
                active = app.control.inspect(timeout=0.5).active_queues() or {}
                seen = {q["name"] for qs in active.values() for q in qs}
                answered = {host.split("@")[0] for host in active}
                if wanted <= seen and wanted_names <= answered:
                    return
                time.sleep(0.2)
        finally:
            app.close()
        raise TimeoutError(f"no worker for {sorted(wanted)} (or not all of "
                           f"{sorted(wanted_names)}) after {timeout} s")

    # -- keeping them running ---------------------------------------------------------------
    def children(self) -> list[Proc]:
        """Every child: ``procs`` and the embedded Redis."""
        return self.procs + ([self.embedded] if self.embedded is not None else [])

    def supervise_once(self) -> None:
        """Notice children that died and start each again once its delay is over (see
        ``RestartPolicy``); does nothing while stopping. Call it every fraction of a second
        from the thread that started the children."""
        for proc in self.children():
            if self.stopping:
                return
            now = self.clock()
            if proc.restart_at is None and proc.popen.poll() is not None:
                self.log(schedule_restart(proc, now, self.restart))
            elif proc.restart_at is not None and now >= proc.restart_at:
                self.log(respawn(proc, now, self.restart, self.log_dir))
                self.record_running()

    def record_running(self) -> None:
        """List the children and their pids in ``running_file``, if set."""
        if self.running_file is not None and not self.stopping:
            write_running(self.running_file, os.getpid(),
                          [(p.name, p.popen.pid) for p in self.children()])

    def watch(self, interval_s: float = 0.5, idle_s: float = IDLE_WATCH_S) -> None:
        """Keep every child running until ``stopping`` is set.

        From the main thread it sleeps until a child exits or a signal arrives (SIGCHLD, and
        the Ctrl-C that sets ``stopping``, wake it), a restart is due, or ``idle_s`` passed: an
        idle machine does not wake it twice a second. Elsewhere it looks every ``interval_s``.
        """
        with _woken_by_signals() as wakeup:
            while not self.stopping:
                self.supervise_once()
                if wakeup is None:
                    time.sleep(interval_s)
                    continue
                due = [p.restart_at for p in self.children() if p.restart_at is not None]
                wait = min([idle_s, *(at - self.clock() for at in due)])
                if not self.stopping and select.select([wakeup], [], [], max(0.0, wait))[0]:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wakeup, 512)

    # -- stopping ---------------------------------------------------------------------------
    def stop(self, proc: Proc, timeout: float = 15.0) -> None:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
            try:
                proc.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc.popen.pid)
                proc.popen.wait(5)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self, timeout: float = 15.0) -> None:
        """Stop every child (SIGTERM to its process group, SIGKILL after ``timeout``), the
        embedded Redis last; nothing is restarted from now on."""
        self.stopping = True
        if self.running_file is not None:
            remove_running(self.running_file)
        terminate(self.procs, timeout)
        self.procs.clear()
        if self.embedded is not None:
            terminate([self.embedded], timeout)
            self.embedded = None
        if self.data_lock is not None:
            self.data_lock.close()
            self.data_lock = None

    def describe_redis(self) -> str:
        return redact(self.settings.redis.url)
