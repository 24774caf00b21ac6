"""A span per task, child of the span that sent it (its ``traceparent`` task header).

Connected to Celery's task signals by ``install``, only when ``VOXQUEUE_OTEL_ENABLED`` is
true; ``workers.runtime.lifecycle`` installs it before its own hooks, so the span ends before
the log context (which knows the session) is cleared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog
from celery.signals import task_failure, task_postrun, task_prerun

from voxqueue.observability import otel
from voxqueue.settings import get_settings

_open: dict[tuple[str, int], otel.TaskSpan] = {}
_errors: dict[tuple[str, int], BaseException] = {}
_role: list[Callable[[], str]] = []


def _key(task_id: str | None) -> tuple[str, int]:
    return (task_id or "", threading.get_ident())


def role() -> str:
    """This worker's queues ("agent", "stt+tts"), as ``install`` was told to name them."""
    return _role[0]() if _role else "worker"


def job_of(args: Any) -> dict[str, Any] | None:
    """The task's job: its last dict argument with a turn id (an old chord callback's: second)."""
    return next((a for a in reversed(args or ()) if isinstance(a, dict) and "turn_id" in a), None)


def task_headers(request: Any) -> dict[str, Any]:
    """The custom headers of a task's message (Celery also copies them onto the request)."""
    found = dict(getattr(request, "headers", None) or {})
    for name in otel.HEADERS:
        value = getattr(request, name, None)
        if value and name not in found:
            found[name] = value
    return found


def span_attributes(name: str, task_id: str | None, job: dict[str, Any] | None) -> dict[str, Any]:
    parts = name.split(".")
    job = job or {}
    return {
        "turn_id": job.get("turn_id"),
        "session_id": job.get("session_id"),
        "queue": parts[1] if len(parts) > 2 else None,
        "step": job.get("step"),
        "seq": job.get("seq"),
        "tool": job.get("name"),
        "tool.call_id": job.get("call_id"),
        "messaging.system": "celery",
        "messaging.operation.type": "process",
        "messaging.message.id": task_id,
        "celery.task": name,
    }


def _on_prerun(task_id: str | None = None, task: Any = None, args: Any = None, **_: Any) -> None:
    """Start the task's span: of a turn's tasks, or of any task sent with a trace context."""
    name = getattr(task, "name", "") or ""
    job = job_of(args)
    headers = task_headers(getattr(task, "request", None))
    if job is None and not headers.get("traceparent"):
        return  # beat's periodic housekeeping: not part of a turn
    handle = otel.start_task_span(
        get_settings(),
        role(),
        name,
        headers,
        job.get("turn_id") if job else None,
        span_attributes(name, task_id, job),
    )
    if handle is not None:
        _open[_key(task_id)] = handle


def _on_failure(
    task_id: str | None = None, exception: BaseException | None = None, **_: Any
) -> None:
    if exception is not None and _key(task_id) in _open:
        _errors[_key(task_id)] = exception


def _on_postrun(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
    handle = _open.pop(_key(task_id), None)
    error = _errors.pop(_key(task_id), None)
    if handle is None:
        return
    if error is None and state == "FAILURE":
        error = RuntimeError("the task failed")
    session = structlog.contextvars.get_contextvars().get("session_id")
    otel.end_task_span(handle, error, {"session_id": session, "celery.state": state})


def install(role_of: Callable[[], str]) -> bool:
    """Connect the hooks when tracing is enabled; True when connected. ``role_of`` names the
    worker (its queues) for the spans' service."""
    if not get_settings().observability.otel_enabled:
        return False
    _role[:] = [role_of]
    task_prerun.connect(_on_prerun, weak=False, dispatch_uid="voxqueue-trace-prerun")
    task_failure.connect(_on_failure, weak=False, dispatch_uid="voxqueue-trace-failure")
    task_postrun.connect(_on_postrun, weak=False, dispatch_uid="voxqueue-trace-postrun")
    return True
