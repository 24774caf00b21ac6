"""The Celery configuration shared by workers and clients: queues, routes, JSON only.

Task names are the contract between the client and the workers; neither imports the other.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from voxqueue.redis_conn import replicas_to_wait, sentinel_address
from voxqueue.settings import QUEUES, ClientSettings

# Task names, by queue.
STT_TRANSCRIBE = "voxqueue.stt.transcribe"
AGENT_STEP = "voxqueue.agent.step"
AGENT_RESUME = "voxqueue.agent.resume"
TOOLS_RUN = "voxqueue.tools.run"
TTS_SPEAK = "voxqueue.tts.speak"

#: Hard time limit per queue, in seconds (enforced by the prefork pool; client timeouts
#: inside the providers bound the thread pool). All stay well under the visibility timeout.
TIME_LIMITS: dict[str, int] = {"stt": 120, "agent": 180, "tools": 90, "tts": 180, "monitor": 60}


def queue_of(task_name: str) -> str:
    """The queue a task runs on: the second part of its dotted name."""
    parts = task_name.split(".")
    if len(parts) < 3 or parts[0] != "voxqueue" or parts[1] not in QUEUES:
        raise ValueError(f"not a voxqueue task name: {task_name!r}")
    return parts[1]


def route_task(name: str, args: Any, kwargs: Any, options: Any, task: Any = None,
               **kw: Any) -> dict[str, str] | None:
    """Celery router: every ``voxqueue.<queue>.*`` task goes to ``<queue>``."""
    try:
        return {"queue": queue_of(name)}
    except ValueError:
        return None


def celery_config(settings: ClientSettings) -> dict[str, Any]:
    """Settings that give at-least-once delivery on Redis without pickle."""
    transport = {
        "visibility_timeout": settings.redis.visibility_timeout,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 25,
        "retry_on_timeout": True,
        # The lease (workers/runtime/lease.py): one worker process sweeps the unacked index
        # each second (voxqueue.broker.transport.QoS), and a sweeper that dies holding kombu's
        # restore lock frees it in 5 s (the default, 300 s, would stop every takeover for 5
        # minutes).
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": 5,
        # One list per queue: a priority goes to the queue's own list, which workers take
        # from without a gap (voxqueue/broker/transport.py).
        "priority_steps": [0],
    }
    backend: dict[str, Any] = {"visibility_timeout": settings.redis.visibility_timeout}
    broker_url, broker_transport = settings.redis.url, "voxqueue.broker.transport:Transport"
    publish_retry = {"max_retries": 5, "interval_start": 0.05, "interval_step": 0.2,
                     "interval_max": 1.0}
    replicas = replicas_to_wait(settings)
    if replicas:
        transport["replicas_to_wait"] = replicas
        transport["replica_wait_ms"] = settings.redis.wait_ms
    sentinels = sentinel_address(settings)  # a bad sentinel URL stops the start, in one line
    if sentinels is not None:
        # Broker and result backend follow the primary the sentinels name. The broker's URL
        # names one sentinel and its options all of them (see voxqueue.broker.SentinelChannel);
        # the backend takes Celery's own form.
        broker_transport = "voxqueue.broker.transport:SentinelTransport"
        broker_url = sentinels.broker_url()
        transport["sentinels"] = sentinels.sentinels
        for options in (transport, backend):
            options["master_name"] = sentinels.master
            options["sentinel_kwargs"] = sentinels.sentinel_kwargs()
        # A publish rides out a failover (the sentinels' detection, promotion, reconnection).
        publish_retry["max_retries"] = 14
    exchange = Exchange("voxqueue", type="direct")
    return {
        "broker_url": broker_url,
        # kombu's Redis transport, taking messages without losing one to a kill
        # (voxqueue/broker/transport.py).
        "broker_transport": broker_transport,
        "result_backend": settings.redis.url,
        "broker_transport_options": transport,
        "result_backend_transport_options": backend,
        "visibility_timeout": settings.redis.visibility_timeout,
        # JSON only: a pickled message is refused, never run.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        # At-least-once: ack after the task ran, requeue when the worker dies.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        # Off: every stage skips work already done by itself (``Stage.complete``), and a
        # redelivered tool call must still finish its join (workers/runtime/join.py).
        "worker_deduplicate_successful_tasks": False,
        # Running stages finish their turn after a broker blip (their Redis calls retry, and
        # every stage is idempotent), rather than being cancelled and waiting for redelivery.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_soft_shutdown_timeout": 10.0,
        "worker_enable_soft_shutdown_on_idle": True,
        "worker_eta_task_limit": 100,
        "worker_hijack_root_logger": False,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_channel_error_retry": True,
        "result_backend_always_retry": True,
        "result_backend_max_retries": 10,
        "result_expires": max(3600, settings.turns.ttl_s),
        "task_publish_retry": True,
        "task_publish_retry_policy": publish_retry,
        # Explicit queues: a slow queue never blocks another.
        "task_queues": [Queue(q, exchange, routing_key=q) for q in QUEUES],
        "task_default_queue": "agent",
        "task_default_exchange": "voxqueue",
        "task_default_routing_key": "agent",
        "task_create_missing_queues": False,
        "task_routes": (route_task,),
        # Events for Flower, from "received" on; start times come from our own events. A
        # "task-sent" event would add a publish to every hop (0.2-0.4 ms here); Flower's broker
        # view and the queue-depth metric show what waits in a queue.
        "worker_send_task_events": True,
        "task_send_sent_event": False,
        "task_track_started": False,
        "task_ignore_result": True,
        "timezone": "UTC",
        "enable_utc": True,
    }


def make_celery(settings: ClientSettings, name: str = "voxqueue") -> Celery:
    """A Celery app with voxqueue's configuration, for a process that sends tasks or inspects
    workers (a client, the exporter, ``doctor``, ``up``); never the current app, so it takes
    nothing from the workers' own (``workers.app``)."""
    app = Celery(name, set_as_current=False)
    app.conf.update(celery_config(settings))
    return app
