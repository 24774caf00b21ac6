"""Worker process hooks: JSON logs, and providers built before the first task, not during it."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from celery.signals import (
    setup_logging,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_ready,
)

import workers.runtime.task_spans  # noqa: F401  (task spans when tracing is on; hooks run first)
from voxqueue.redaction import redact_event

log = structlog.get_logger("voxqueue.worker")


@setup_logging.connect
def configure_logging(loglevel: Any = None, **_: Any) -> None:
    """One JSON object per line, for Celery's own records and ours alike."""
    from voxqueue.settings import get_settings

    level = loglevel if isinstance(loglevel, int) else getattr(
        logging, str(loglevel or get_settings().log_level).upper(), logging.INFO)
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


def warm_up() -> None:
    """Build the providers of the queues this worker consumes, so no task pays for it."""
    from workers.app import app

    queues = set(app.amqp.queues.consume_from or ())
    rt = app.runtime
    wanted = {"stt": ("transcriber",), "agent": ("tools", "chat_model"), "tools": ("tools",),
              "tts": ("synthesizer",)}
    for queue in sorted(queues):
        for attr in wanted.get(queue, ()):
            try:
                getattr(rt, attr)
            except Exception as exc:  # a missing key is reported per turn, not fatal here
                log.warning("provider not ready", queue=queue, provider=attr, error=str(exc))
    if "agent" in queues:  # the tokenizer's encoding takes a moment to load
        try:
            from workers.agent.context.tokens import encoding_for

            encoding_for(rt.settings.llm_model)
        except Exception as exc:
            log.warning("tokenizer not ready", error=str(exc))
    log.info("worker warmed up", queues=sorted(queues))


@worker_process_init.connect
def _warm_child(**_: Any) -> None:
    warm_up()


@worker_ready.connect
def _warm_main(sender: Any = None, **_: Any) -> None:
    controller = getattr(sender, "controller", None)
    pool_cls = getattr(controller, "pool_cls", None)
    prefork = "prefork" in f"{getattr(pool_cls, '__module__', '')}"
    if not prefork:
        warm_up()
    start_lease(sender, enforce_limits=not prefork)


def start_lease(consumer: Any, *, enforce_limits: bool) -> None:
    """Keep this worker's tasks leased while it lives (``workers/runtime/lease.py``). In the
    prefork pool the pool itself enforces time limits; elsewhere the lease keeper does."""
    from workers.app import app
    from workers.runtime.lease import LeaseKeeper

    rt = app.runtime
    rt.lease = LeaseKeeper(consumer, rt.redis, rt.settings.visibility_timeout, enforce_limits)
    rt.lease.start()
    log.info("lease keeper started", lease_s=rt.settings.visibility_timeout,
             enforces_time_limits=enforce_limits)


@task_prerun.connect
def _bind_turn(task: Any = None, args: Any = None, **_: Any) -> None:
    """Every log line of a task carries its turn and queue (session and device once known)."""
    from workers.app import app

    lease = app.runtime.lease
    if lease is not None and task is not None:
        tag = (task.request.delivery_info or {}).get("delivery_tag")
        lease.task_started(task.request.id, tag, task.soft_time_limit, task.time_limit)
    structlog.contextvars.clear_contextvars()
    job = next((a for a in reversed(args or ()) if isinstance(a, dict) and "turn_id" in a), None)
    name = getattr(task, "name", "") or ""
    parts = name.split(".")
    structlog.contextvars.bind_contextvars(
        task=name, queue=parts[1] if len(parts) > 2 else None,
        turn_id=job.get("turn_id") if job else None)


@task_postrun.connect
def _unbind_turn(task: Any = None, **_: Any) -> None:
    from workers.app import app

    lease = app.runtime.lease
    if lease is not None and task is not None:
        lease.task_ended(task.request.id)
    structlog.contextvars.clear_contextvars()
