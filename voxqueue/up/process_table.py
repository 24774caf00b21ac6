"""What one machine runs: the pool and processes of each queue's workers, their names, and the
beat scheduler."""

from __future__ import annotations

from voxqueue.settings import QUEUES, DashboardSettings, Settings

#: Seconds between a worker's heartbeats (events Flower shows workers by; Celery's default 2).
#: Flower counts a worker offline after two missed ones.
HEARTBEAT_S = 10

#: Tasks Flower keeps in memory (its default 10,000): about a day of turns at 5,000 a day, each
#: 5-10 tasks (speech, one or two agent steps, tools, a TTS task per sentence), in ~100 MB. The
#: setting's default, for the deploy files.
FLOWER_MAX_TASKS: int = DashboardSettings.model_fields["flower_max_tasks"].default

#: Flower asks every worker to send events every 5 s (its ``enable_events``), waking each idle
#: worker to answer; every worker here is started with ``-E`` already, so it is off.
FLOWER_NO_EVENTS_ASK = "--enable_events=False"

#: Pool and concurrency per queue for cloud providers: threads, since every call waits on I/O.
#: A TTS slot is held for as long as a sentence streams, so that queue needs the most.
DEFAULT_POOLS: dict[str, tuple[str, int]] = {
    "stt": ("threads", 32),
    "agent": ("threads", 32),
    "tools": ("threads", 32),
    "tts": ("threads", 64),
    "monitor": ("threads", 4),
}

#: Worker processes per queue of the compose file and the Kubernetes minimum (and of
#: ``voxqueue up --processes per-queue``): a worker takes its tasks in one consumer thread,
#: which shares the interpreter lock with every task thread, so with dozens of streams in
#: flight one process
#: takes new tasks late (bench, 50 concurrent turns: TTS jobs waited ~400 ms for one process of
#: 64 threads, ~300 ms for one of 192, ~70 ms for three of 64). Other queues run one.
DEFAULT_PROCESSES: dict[str, int] = {"agent": 2, "tts": 3}


#: ``voxqueue up``'s worker unless told ``--processes``: one process consuming every queue (the
#: take from several lists, ``voxqueue.broker.take``), its threads pool as large as the
#: per-queue pools together (a thread starts only when a task needs it). One machine at rest
#: then holds one interpreter, one set of providers and one consumer loop, not eight; the
#: deployments (compose, Kubernetes) and ``up --processes`` keep a worker per queue, each scaled
#: on its own.
SHARED_WORKER = "all"
SHARED_CONCURRENCY = sum(concurrency for _pool, concurrency in DEFAULT_POOLS.values())

#: ``up --processes per-queue``: a worker per queue, ``default_processes`` of each.
PER_QUEUE = "per-queue"

#: celery-redbeat (schedule and lock in Redis), hardened against Redis restarts.
BEAT_SCHEDULER = "workers.housekeeping.beat_scheduler:ResilientScheduler"

#: The Celery app beat and Flower run with under ``voxqueue up``: the settings, none of the
#: task modules and providers (``workers.app``'s).
CONTROL_APP = "workers.control_app"


def default_processes(settings: Settings) -> dict[str, int]:
    """``DEFAULT_PROCESSES`` where the queue's provider streams from the cloud; one process
    where it runs an offline model (CPU-bound: more processes would each load the model and
    share the same cores; the local intents need no more either)."""
    used = settings.providers.in_use()
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
