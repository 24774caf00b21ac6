"""Worker process hooks: JSON logs, providers built before the first task (not during it), the
lease keeper, and each task's log context. ``install(app)`` connects them for one app."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from celery.signals import (
    setup_logging,
    task_postrun,
    task_prerun,
    task_received,
    worker_process_init,
    worker_ready,
)

from voxqueue.observability.redaction import redact_event
from voxqueue.settings import get_settings
from workers.runtime import task_spans
from workers.runtime.crash import warn_if_armed
from workers.runtime.lease import LeaseKeeper
from workers.runtime.resources import Runtime
from workers.runtime.stage import delivery_tag

if TYPE_CHECKING:
    from celery import Celery

log = structlog.get_logger("voxqueue.worker")

#: The providers each queue's tasks use, built when the worker starts.
WANTED = {"stt": ("transcriber",), "agent": ("tools", "chat_model"), "tools": ("tools",),
          "tts": ("synthesizer",)}
#: The provider stage each queue's workers serve.
STAGE_OF = {"stt": "stt", "agent": "llm", "tts": "tts"}


def configure_logging(loglevel: Any = None, **_: Any) -> None:
    """One JSON object per line, for Celery's own records and ours alike."""
    level = loglevel if isinstance(loglevel, int) else getattr(
        logging, str(loglevel or get_settings().observability.log_level).upper(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    redact_event,  # no secret in a log line, ours or Celery's
                    structlog.processors.JSONRenderer()]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Celery's "Task … received" line: a JSON record per task, written by the consumer's loop
    # (so it names no turn), ~4% of a busy worker's CPU. Kept at DEBUG; the "succeeded" line,
    # which carries the turn's context, stays.
    logging.getLogger("celery.worker.strategy").setLevel(
        level if level <= logging.DEBUG else logging.WARNING)


def warm_up(rt: Runtime, queues: frozenset[str]) -> None:
    """Build the providers of the queues this worker consumes, so no task pays for it."""
    rt.queues = queues
    for queue in sorted(queues):
        for attr in WANTED.get(queue, ()):
            try:
                getattr(rt, attr)
            except Exception as exc:  # a missing key is reported per turn, not fatal here
                log.warning("provider not ready", queue=queue, provider=attr, error=str(exc))
    stages = {STAGE_OF[q]: rt.settings.providers.in_use()[STAGE_OF[q]]
              for q in queues if q in STAGE_OF}
    if stages:
        try:
            rt.redis.hset(rt.keys.providers_in_service(), mapping=dict[Any, Any](stages))
        except Exception as exc:  # Redis is not up yet: describe falls back on settings
            log.warning("providers not recorded", error=str(exc))
    log.info("worker warmed up", queues=sorted(queues), providers=stages)


def start_lease(rt: Runtime, consumer: Any, *, enforce_limits: bool) -> None:
    """Keep this worker's tasks leased while it lives (``workers/runtime/lease.py``). In the
    prefork pool the pool itself enforces time limits; elsewhere the lease keeper does."""
    rt.lease = LeaseKeeper(consumer, rt.redis, rt.settings.redis.visibility_timeout, enforce_limits)
    rt.lease.start()
    log.info("lease keeper started", lease_s=rt.settings.redis.visibility_timeout,
             enforces_time_limits=enforce_limits)


def bind_task(rt: Runtime, task: Any, args: Any) -> None:
    """Every log line of a task carries its turn and queue (session and device once known)."""
    lease = rt.lease
    if lease is not None and task is not None:
        lease.task_started(task.request.id, delivery_tag(task), task.soft_time_limit,
                           task.time_limit)
    structlog.contextvars.clear_contextvars()
    job = task_spans.job_of(args)
    name = getattr(task, "name", "") or ""
    parts = name.split(".")
    structlog.contextvars.bind_contextvars(
        task=name, queue=parts[1] if len(parts) > 2 else None,
        turn_id=job.get("turn_id") if job else None)


def wake_lease(rt: Runtime) -> None:
    """A task arrived: the lease keeper renews from now on (it sleeps while none is held)."""
    if rt.lease is not None:
        rt.lease.task_received()


def unbind_task(rt: Runtime, task: Any) -> None:
    lease = rt.lease
    if lease is not None and task is not None:
        lease.task_ended(task.request.id)
    structlog.contextvars.clear_contextvars()


def install(app: Celery, runtime: Callable[[], Runtime]) -> None:
    """Connect the hooks of ``app``'s workers; ``runtime`` gives the process's Runtime."""

    def queues() -> frozenset[str]:
        return frozenset(app.amqp.queues.consume_from or ())

    def warm_child(**_: Any) -> None:
        warm_up(runtime(), queues())

    def warm_main(sender: Any = None, **_: Any) -> None:
        controller = getattr(sender, "controller", None)
        pool_cls = getattr(controller, "pool_cls", None)
        prefork = "prefork" in f"{getattr(pool_cls, '__module__', '')}"
        if not prefork:
            warm_up(runtime(), queues())
        start_lease(runtime(), sender, enforce_limits=not prefork)
        warn_if_armed(runtime().settings)

    def prerun(task: Any = None, args: Any = None, **_: Any) -> None:
        bind_task(runtime(), task, args)

    def postrun(task: Any = None, **_: Any) -> None:
        unbind_task(runtime(), task)

    def received(**_: Any) -> None:
        wake_lease(runtime())

    task_spans.install(lambda: "+".join(sorted(queues())) or "worker")  # spans end first
    setup_logging.connect(configure_logging, weak=False, dispatch_uid="voxqueue-logging")
    worker_process_init.connect(warm_child, weak=False, dispatch_uid="voxqueue-warm-child")
    worker_ready.connect(warm_main, weak=False, dispatch_uid="voxqueue-warm-main")
    task_prerun.connect(prerun, weak=False, dispatch_uid="voxqueue-bind-task")
    task_postrun.connect(postrun, weak=False, dispatch_uid="voxqueue-unbind-task")
    task_received.connect(received, weak=False, dispatch_uid="voxqueue-task-received")
