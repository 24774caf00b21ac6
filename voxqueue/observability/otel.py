"""OpenTelemetry traces, one per turn across every queue (the optional ``otel`` extra).

Off unless ``VOXQUEUE_OTEL_ENABLED=true``; while off, nothing here imports OpenTelemetry, and
every function is a cheap no-op (``inject()`` returns ``{}``).

- **One trace per turn, whatever happens.** A turn's trace id *is* its turn id (the 32 hex
  digits of a uuid4; any other id is hashed to 128 bits). The client's root span ``turn`` and
  every task span of the turn get it, so a hop that loses its context still lands in the
  turn's trace, and a ratio sampler (``OTEL_TRACES_SAMPLER=traceidratio``) decides the same
  for every process of a turn.
- **Context in the task headers.** The sender puts W3C ``traceparent`` (and ``tracestate``)
  in the Celery message headers (:func:`inject`); the worker makes its task span a child of
  it (:func:`extract`, ``workers/runtime/task_spans.py``).
- The ``turn`` span covers the client's sending of the first task and ends then: the tasks
  are its (asynchronous) children and the trace ends with the last of them.
- Exporters (``VOXQUEUE_OTEL_EXPORTER``): ``otlp`` (OTLP/HTTP, configured by the standard
  ``OTEL_EXPORTER_OTLP_*`` variables), ``console``, or ``jsonl:/path/file`` (one JSON object
  per finished span, appended; several processes may share the file).
- Each process has one provider per configuration; its resource's ``service.name`` is
  ``<VOXQUEUE_OTEL_SERVICE_NAME>-<role>`` (``client``, or the worker's queues).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voxqueue.settings import ClientSettings

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("voxqueue.otel")

#: The W3C trace-context headers carried by every task message of a traced turn.
HEADERS: tuple[str, ...] = ("traceparent", "tracestate")
INSTALL_HINT = "pip install 'voxqueue[otel]'"

_lock = threading.Lock()
_providers: dict[tuple[str, str, str], TracerProvider | None] = {}
_active = False  # set once a provider exists in this process: inject() may then find a span
_last: TracerProvider | None = None  # the provider of :func:`span`
_turn_trace_id: contextvars.ContextVar[int] = contextvars.ContextVar(
    "voxqueue_turn_trace_id", default=0
)
_HEX32 = re.compile(r"[0-9a-f]{32}")


def trace_id_of(turn_id: str) -> int:
    """The trace id of a turn: its id when it is 32 hex digits, else a hash of it."""
    if _HEX32.fullmatch(turn_id) and int(turn_id, 16):
        return int(turn_id, 16)
    return int.from_bytes(hashlib.sha256(turn_id.encode()).digest()[:16], "big") or 1


@contextmanager
def _turn_ids(turn_id: str | None) -> Iterator[None]:
    """Root spans started inside get the turn's trace id (children inherit their parent's)."""
    token = _turn_trace_id.set(trace_id_of(turn_id) if turn_id else 0)
    try:
        yield
    finally:
        _turn_trace_id.reset(token)


def tracer(settings: ClientSettings, role: str) -> Tracer | None:
    """The process's tracer for this configuration and role; None when tracing is off.

    With tracing on but OpenTelemetry missing, warns once and returns None.
    """
    global _active, _last
    if not settings.observability.otel_enabled:
        return None
    key = (settings.observability.otel_service_name, role, settings.observability.otel_exporter)
    with _lock:
        if key not in _providers:
            try:
                _providers[key] = _build_provider(settings, role)
            except ImportError as exc:
                if not any(p is None for p in _providers.values()):  # say it once
                    log.warning(
                        "tracing is on but OpenTelemetry is not installed (%s): %s",
                        INSTALL_HINT,
                        exc,
                    )
                _providers[key] = None
            _active = _active or _providers[key] is not None
        provider = _providers[key]
        _last = provider or _last
    return provider.get_tracer("voxqueue") if provider is not None else None


def _build_provider(settings: ClientSettings, role: str) -> TracerProvider:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class TurnIdGenerator(RandomIdGenerator):
        """Random ids, except a root span's trace id inside :func:`_turn_ids`."""

        def generate_trace_id(self) -> int:
            return _turn_trace_id.get() or super().generate_trace_id()

        def is_trace_id_random(self) -> bool:
            return False

    resource = Resource.create(
        {
            "service.name": f"{settings.observability.otel_service_name}-{role}",
            "service.namespace": settings.observability.otel_service_name,
            "voxqueue.role": role,
        }
    )
    provider = TracerProvider(resource=resource, id_generator=TurnIdGenerator())
    exporter = settings.observability.otel_exporter.strip()
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter.startswith("jsonl:") and exporter[len("jsonl:") :].strip():
        path = exporter[len("jsonl:") :].strip()
        provider.add_span_processor(SimpleSpanProcessor(_jsonl_exporter(path)))
    else:
        raise ValueError(
            f"unknown VOXQUEUE_OTEL_EXPORTER {exporter!r}: use otlp, console or jsonl:/path/file"
        )
    if role != "client":  # a worker owns its process; a client leaves the app's choice alone
        with contextlib.suppress(Exception):
            if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
                trace.set_tracer_provider(provider)
    return provider


def _jsonl_exporter(path: str) -> SpanExporter:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonlExporter(SpanExporter):
        """Appends one JSON object per span; one ``write`` per line, so processes may share."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            data = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
            return SpanExportResult.SUCCESS

    return JsonlExporter()


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as a flat JSON-able dict (ids in hex, times in ns since the epoch)."""
    ctx, parent = span.get_span_context(), span.parent
    return {
        "name": span.name,
        "trace_id": f"{ctx.trace_id:032x}" if ctx else None,
        "span_id": f"{ctx.span_id:016x}" if ctx else None,
        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "service": span.resource.attributes.get("service.name"),
        "events": [event.name for event in span.events],
        "links": [
            f"{link.context.trace_id:032x}-{link.context.span_id:016x}" for link in span.links
        ],
    }


def inject() -> dict[str, str]:
    """W3C trace-context headers for the current span; ``{}`` when there is none."""
    if not _active:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def extract(headers: Mapping[str, Any] | None) -> Context | None:
    """The remote parent carried in ``headers``; None when tracing is off or none is there."""
    if not _active or not headers or not headers.get("traceparent"):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {k: str(headers[k]) for k in HEADERS if headers.get(k)}
    return TraceContextTextMapPropagator().extract(carrier)


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Span | None]:
    """A child span of the current one (a provider call, a tool) when tracing is on.

    ``with otel.span("llm.complete", step=2):`` costs nothing while tracing is off, and
    records an exception raised inside as the span's error.
    """
    provider = _last
    if provider is None:
        yield None
        return
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        yield None  # outside a traced task: no orphan trace
        return
    with provider.get_tracer("voxqueue").start_as_current_span(
        name, attributes={k: v for k, v in attributes.items() if v is not None}
    ) as current:
        yield current


@contextmanager
def turn_root(
    settings: ClientSettings, turn_id: str, task_name: str,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[dict[str, str]]:
    """The client's root span ``turn`` around sending a turn's task; yields the headers to send.

    The span starts a new trace (id: the turn's) even inside an application's own span,
    which it links to instead.
    """
    tr = tracer(settings, "client")
    if tr is None:
        yield {}
        return
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, SpanKind

    outer = trace.get_current_span().get_span_context()
    links = [Link(outer)] if outer.is_valid else []
    attrs = {"turn_id": turn_id, "celery.task": task_name, **(attributes or {})}
    with (
        _turn_ids(turn_id),
        tr.start_as_current_span(
            "turn", context=Context(), kind=SpanKind.PRODUCER, links=links, attributes=attrs
        ),
    ):
        yield inject()


@dataclass
class TaskSpan:
    """A task's span, current until :func:`end_task_span`."""

    span: Span
    token: Any  # the context token to detach


def start_task_span(
    settings: ClientSettings,
    role: str,
    name: str,
    headers: Mapping[str, Any] | None,
    turn_id: str | None,
    attributes: Mapping[str, Any],
) -> TaskSpan | None:
    """Start a task's span (child of the sender's span in ``headers``) and make it current."""
    tr = tracer(settings, role)
    if tr is None:
        return None
    from opentelemetry import context, trace
    from opentelemetry.trace import SpanKind

    parent = extract(headers)
    with _turn_ids(turn_id):
        span = tr.start_span(
            name,
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={k: v for k, v in attributes.items() if v is not None},
        )
    token = context.attach(trace.set_span_in_context(span))
    return TaskSpan(span, token)


def end_task_span(
    handle: TaskSpan,
    error: BaseException | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """End a task's span (an error status when the task raised) and restore the context."""
    from opentelemetry import context
    from opentelemetry.trace import Status, StatusCode

    try:
        for key, value in (attributes or {}).items():
            if value is not None:
                handle.span.set_attribute(key, value)
        if error is not None:
            handle.span.record_exception(error)
            handle.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        handle.span.end()
    finally:
        context.detach(handle.token)
