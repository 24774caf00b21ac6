"""A Prometheus exporter fed by the turns' own events: no worker runs an HTTP server.

Every ended turn is announced on one Redis Stream; the exporter reads each such turn's events
and observes its histograms (queue waits, stage and provider times, time to first audio), and
samples queue depths and live workers per queue. A tool call is labelled with its tool's name
only when the name is one the workers offer; any other name (a model's or a client's
invention) is counted as ``other``, so the label's values stay few.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from voxqueue.contracts import TurnEvent, TurnSpec
from voxqueue.keys import Keys
from voxqueue.redis_conn import connect
from voxqueue.settings import QUEUES, Settings
from voxqueue.turns import StreamEntry, TurnNotFound, TurnStore

_FAST = (0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
_SLOW = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 60.0)
#: A turn's events without their audio, oldest first (id, event, id, event…): the exporter
#: has no use for the ~400 KB of speech a turn's stream holds, and reading it cost more CPU
#: (the exporter's and Redis's) than the rest of its work per turn.
_EVENTS_ONLY = """
local out = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'e' then
      out[#out + 1] = entry[1]
      out[#out + 1] = fields[i + 1]
    end
  end
end
return out
"""
_START_QUEUE = {"stt-start": "stt", "agent-step": "agent", "tool-start": "tools",
                "tts-start": "tts"}


#: The ``tool`` label of a call to a name that is not a known tool.
OTHER_TOOL = "other"


class TurnMetrics:
    """The exporter's metrics, on a registry of their own; ``tool_names``: the tools whose
    names may be ``tool`` labels."""

    def __init__(self, tool_names: Iterable[str] = ()) -> None:
        self.tool_names = frozenset(tool_names)
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_wait = Histogram("voxqueue_queue_wait_seconds",
                                    "Time a job waited in its queue (enqueued → started).",
                                    ["queue"], buckets=_FAST, registry=r)
        self.stage = Histogram("voxqueue_stage_seconds", "Time inside a stage's provider call.",
                               ["stage", "provider"], buckets=_SLOW, registry=r)
        self.ttfb = Histogram("voxqueue_provider_ttfb_seconds",
                              "Time to the first byte of a provider's answer.",
                              ["stage", "provider"], buckets=_SLOW, registry=r)
        self.tool = Histogram("voxqueue_tool_seconds", "Time a tool call took.", ["tool", "ok"],
                              buckets=_SLOW, registry=r)
        self.first_audio = Histogram("voxqueue_time_to_first_audio_seconds",
                                     "End of speech (turn created) → first reply audio chunk.",
                                     buckets=_SLOW, registry=r)
        self.turn = Histogram("voxqueue_turn_seconds", "Turn duration, start to run-end.",
                              ["status"], buckets=_SLOW, registry=r)
        self.turns = Counter("voxqueue_turns", "Turns ended, by status.", ["status"], registry=r)
        self.queue_depth = Gauge("voxqueue_queue_depth", "Jobs waiting in a queue.", ["queue"],
                                 registry=r)
        self.workers = Gauge("voxqueue_workers", "Live workers consuming a queue.", ["queue"],
                             registry=r)

    def observe_turn(self, spec: TurnSpec, entries: Iterable[StreamEntry]) -> None:
        providers: dict[str, str] = {}
        first_audio: float | None = None
        for entry in entries:
            ev, d = entry.event, entry.event.data
            queue = _START_QUEUE.get(ev.type)
            if queue and d.get("queue_ms") is not None:
                self.queue_wait.labels(queue).observe(float(d["queue_ms"]) / 1000)
            if ev.type in ("stt-start", "llm-start") and d.get("provider"):
                providers[ev.type.split("-")[0]] = str(d["provider"])
            elif ev.type in ("stt-end", "llm-end", "tts-end"):
                stage = ev.type.split("-")[0]
                provider = str(d.get("provider") or providers.get(stage, "unknown"))
                if d.get("ms") is not None:
                    self.stage.labels(stage, provider).observe(float(d["ms"]) / 1000)
                if d.get("ttfb_ms") is not None:
                    self.ttfb.labels(stage, provider).observe(float(d["ttfb_ms"]) / 1000)
            elif ev.type == "tool-end":
                self.tool.labels(self.tool_label(d.get("name")),
                                 str(bool(d.get("ok"))).lower()).observe(
                    float(d.get("ms", 0)) / 1000)
            elif ev.type == "tts-chunk" and first_audio is None:
                first_audio = ev.ts
                self.first_audio.observe(max(0.0, ev.ts - spec.created_at))
            elif ev.type == "run-end":
                status = str(d.get("status", "error"))
                self.turns.labels(status).inc()
                self.turn.labels(status).observe(max(0.0, ev.ts - spec.created_at))

    def tool_label(self, name: object) -> str:
        """``name`` when it is a known tool's, else ``other``."""
        return name if isinstance(name, str) and name in self.tool_names else OTHER_TOOL


#: How often the metrics server's thread wakes with no request (only to look for a stop).
IDLE_POLL_S = 3600.0


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape."""


class _Server6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


class Exporter:
    """Reads ended turns from Redis and serves the metrics over HTTP."""

    def __init__(self, settings: Settings, tool_names: Iterable[str] | None = None) -> None:
        """``tool_names``: default, the tools workers with the same settings offer."""
        self.settings = settings
        self.keys = Keys(settings.redis.key_prefix)
        self.redis = connect(settings)
        self.store = TurnStore(self.redis, self.keys, settings.turns.ttl_s,
                               settings.turns.session_ttl_s)
        if tool_names is None:
            from workers.tool_registry.listing import offered_tool_names

            tool_names = offered_tool_names(settings)
        self.metrics = TurnMetrics(tool_names)
        self._events_only = self.redis.register_script(_EVENTS_ONLY)
        self._stop = threading.Event()
        self._celery: Any = None  # built on the first sample, reused after

    def _control(self) -> Any:
        if self._celery is None:

            from voxqueue.celery_config import make_celery

            self._celery = make_celery(self.settings, "voxqueue-exporter")
        return self._celery.control

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """``/metrics`` on ``addr:port``, from a daemon thread (OSError when the port is
        taken)."""
        server = make_server(addr, port, make_wsgi_app(self.metrics.registry),
                             _Server6 if ":" in addr else ThreadingWSGIServer,
                             handler_class=_QuietHandler)
        # prometheus_client's own server looks for a stop every 0.5 s: two wake-ups a second of
        # an idle process. A request still wakes it at once; it is never stopped.
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": IDLE_POLL_S},
                         name="metrics-http", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._celery is not None:
            self._celery.close()

    def run(self, last_id: str = "$", sample_every_s: float = 10.0,
            workers_every_s: float = 60.0) -> None:
        """Follow the ended-turns stream until stopped (from now on, when ``last_id`` is $):
        queue depths every ``sample_every_s``, live workers every ``workers_every_s`` (a
        broadcast that wakes every worker, so seldom)."""
        if last_id == "$":
            newest: Any = self.redis.xrevrange(self.keys.ended_turns(), count=1)
            last_id = newest[0][0].decode() if newest else "0-0"
        next_sample = next_workers = 0.0
        while not self._stop.is_set():
            now = time.time()
            if now >= next_sample:
                # No worker answering (all starting, or the broker blinked): ask again at the
                # next sample, not a minute later.
                if self.sample_queues(workers=now >= next_workers):
                    next_workers = now + workers_every_s
                next_sample = now + sample_every_s
            block_ms = max(1, int(min(sample_every_s, next_sample - time.time()) * 1000))
            answer: Any = self.redis.xread({self.keys.ended_turns(): last_id}, block=block_ms,
                                           count=100)
            for _stream, items in answer or []:
                for entry_id, fields in items:
                    last_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    self.observe(fields.get(b"turn_id", b"").decode())

    def observe(self, turn_id: str) -> None:
        try:
            spec = self.store.spec(turn_id)
        except TurnNotFound:
            return
        self.metrics.observe_turn(spec, self.events(turn_id))

    def events(self, turn_id: str) -> list[StreamEntry]:
        """The turn's events, oldest first, without their audio."""
        flat: Any = self._events_only(keys=[self.keys.events(turn_id)])
        return [StreamEntry(id=entry_id.decode(), event=TurnEvent.model_validate_json(raw))
                for entry_id, raw in zip(flat[::2], flat[1::2], strict=True)]

    def sample_queues(self, workers: bool = True) -> bool:
        """Each queue's depth and (with ``workers``) how many live workers consume it; whether
        workers were counted (some answered)."""
        pipe = self.redis.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.llen(queue)
        for queue, depth in zip(QUEUES, pipe.execute(), strict=True):
            self.metrics.queue_depth.labels(queue).set(int(depth))
        if not workers:
            return False
        try:
            active = self._control().inspect(timeout=1.0).active_queues() or {}
        except Exception:  # the broker blinked: keep the last values
            return False
        for queue in QUEUES:
            live = sum(1 for qs in active.values() if any(q["name"] == queue for q in qs))
            self.metrics.workers.labels(queue).set(live)
        return bool(active)
