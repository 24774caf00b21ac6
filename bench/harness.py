"""The benchmark harness: a private Redis, the fake providers and real worker processes."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.redis_delay import DelayProxy
from testkit import ROOT, RedisServer, system_env
from testkit.fakes import FakeProviders, spawn
from voxqueue.client.direct import Client
from voxqueue.settings import QUEUES, RedisSettings, Settings
from voxqueue.turns import StreamEntry
from voxqueue.up.supervisor import Supervisor


@dataclass
class BenchSystem:
    fake: Any
    sup: Supervisor
    client: Client
    pids: dict[str, int]
    """Every process of the run by role: workers (``tts``, ``tts-2``…), Redis, the fake
    providers, this benchmark."""
    proxy: DelayProxy | None = None
    """With ``via_proxy``: the delaying proxy every process reaches Redis through."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU time of a process's main thread so far (Linux ``/proc``; 0 elsewhere). In a Celery
    worker that is the consumer's loop (takes, acks, events); the tasks run on others."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def context_switches(pid: int) -> int:
    """Times the threads of a process so far gave up the CPU, waiting or preempted (Linux
    ``/proc``; 0 elsewhere): each is a wake-up to come back from. A thread's count leaves with
    it: those of threads that ended (a timer's) are not in it."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # the thread ended meanwhile
            continue
        total += sum(int(line.split()[1]) for line in lines if "ctxt_switches" in line)
    return total


@contextmanager
def _fake_process(profile: Mapping[str, float] | None) -> Iterator[Any]:
    """The fake providers in a process of their own, so the benchmark's client threads and the
    fake server do not share one interpreter lock."""
    proc, fake = spawn(profile=dict(profile) if profile else None, cwd=str(ROOT))
    fake.pid = proc.pid
    try:
        yield fake
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def bench_system(profile: Mapping[str, float] | None = None,
                 pools: Mapping[str, tuple[str, int]] | None = None,
                 queues: Sequence[str] = QUEUES, separate_fake: bool = False,
                 processes: Mapping[str, int] | None = None, offline: bool = False,
                 via_proxy: bool = False, **env: str) -> Iterator[BenchSystem]:
    """Start everything (``processes`` worker processes per queue, default one); stop it all
    on exit. ``offline``: no provider keys, so the offline providers answer (the fakes still
    run, unused). ``via_proxy``: every process (workers, client) reaches Redis through a
    :class:`DelayProxy` (no delay until one is set)."""
    redis_server = RedisServer()
    redis_server.start()
    proxy = DelayProxy("127.0.0.1", redis_server.port).start() if via_proxy else None
    redis_url = proxy.url() if proxy else redis_server.url
    try:
        fakes: Any = _fake_process(profile) if separate_fake else FakeProviders()
        with fakes as fake:
            if profile and not separate_fake:
                fake.set_profile(**profile)
            full_env = system_env(redis_url, None if offline else fake,
                                  VOXQUEUE_LOG_LEVEL="WARNING", **env)
            settings = Settings(redis=RedisSettings(url=redis_url))
            sup = Supervisor(settings, env=full_env,
                             log_dir=Path(tempfile.mkdtemp(prefix="vq-bench-")))
            try:
                sup.start_workers(pools=pools, queues=queues, processes=processes)
                pids = {p.name.removeprefix("worker-"): p.popen.pid for p in sup.procs}
                sup.wait_for_workers(queues, timeout=120, names=list(pids))
                pids["redis"] = redis_server.proc.pid if redis_server.proc else 0
                if separate_fake:
                    pids["fake providers"] = fake.pid
                pids["benchmark (listeners)"] = os.getpid()
                with Client(settings) as client:
                    yield BenchSystem(fake, sup, client, pids, proxy)
            finally:
                sup.stop_all()
    finally:
        if proxy is not None:
            proxy.stop()
        redis_server.stop()


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def turn_breakdown(entries: Sequence[StreamEntry]) -> dict[str, Any]:
    """End-to-end time, time inside providers and tools, and queue waits, from one turn's events.

    Tools of one step run in parallel: a step counts for its longest call. Sentences of one reply
    may be synthesized in parallel: TTS counts from the first tts-start to the last tts-end.
    """
    by_type: dict[str, list[StreamEntry]] = {}
    for e in entries:
        by_type.setdefault(e.event.type, []).append(e)
    start = by_type["run-start"][0].event.ts
    end = by_type["run-end"][0].event.ts
    stt = sum(float(e.event.data.get("ms", 0)) for e in by_type.get("stt-end", []))
    llm = sum(float(e.event.data.get("ms", 0)) for e in by_type.get("llm-end", []))
    steps: dict[int, float] = {}
    for e in by_type.get("tool-end", []):
        step = int(e.event.data.get("step", 0))
        steps[step] = max(steps.get(step, 0.0), float(e.event.data.get("ms", 0)))
    tools = sum(steps.values())
    tts = 0.0
    if by_type.get("tts-start") and by_type.get("tts-end"):
        tts = (max(e.event.ts for e in by_type["tts-end"])
               - min(e.event.ts for e in by_type["tts-start"])) * 1000
    hops = [float(e.event.data["queue_ms"]) for e in entries if "queue_ms" in e.event.data]
    e2e = (end - start) * 1000
    first_audio = next((e.event.ts for e in entries if e.event.type == "tts-chunk"), None)
    return {"e2e_ms": e2e, "inside_ms": stt + llm + tools + tts,
            "overhead_ms": e2e - (stt + llm + tools + tts), "hops_ms": hops,
            "first_audio_ms": (first_audio - start) * 1000 if first_audio else None}
