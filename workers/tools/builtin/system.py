"""System status: queue depths, live workers, turns in progress and recent turn latency."""

from __future__ import annotations

import json
import statistics
from functools import lru_cache
from typing import Any

from voxqueue.settings import QUEUES, Settings
from workers.runtime.resources import Runtime
from workers.tools.builtin._deps import runtime
from workers.tools.registry import tool

__all__ = ["system_status"]

# kombu's Redis transport keeps priorities 1-9 of a queue in lists named "<queue>\x06\x16<n>".
_PRIORITY_SEP = "\x06\x16"
_SAMPLE_TURNS = 50
_SCAN_BUDGET = 5000


@lru_cache(maxsize=4)
def _celery(broker_url: str) -> Any:
    """A Celery app on this broker, for remote-control inspection."""
    from workers.app import app

    if app.conf.broker_url == broker_url:
        return app
    from celery import Celery

    from voxqueue.celery_config import celery_config

    other = Celery("voxqueue-status", set_as_current=False)
    other.conf.update(
        celery_config(
            Settings(
                _env_file=None,  # type: ignore[call-arg]
                redis_url=broker_url,
            )
        )
    )
    return other


def queue_depths(rt: Runtime) -> dict[str, int]:
    """Messages waiting in each queue (all priority lists added up)."""
    pipe = rt.redis.pipeline(transaction=False)
    for queue in QUEUES:
        pipe.llen(queue)
        for priority in range(1, 10):
            pipe.llen(f"{queue}{_PRIORITY_SEP}{priority}")
    counts = pipe.execute()
    step = 10
    return {q: sum(counts[i * step : (i + 1) * step]) for i, q in enumerate(QUEUES)}


def live_workers(rt: Runtime, timeout_s: float = 1.0) -> dict[str, int] | None:
    """Workers consuming each queue that answer within ``timeout_s`` (None when the broker
    could not be asked)."""
    try:
        inspect = _celery(rt.settings.redis_url).control.inspect(timeout=timeout_s)
        replies = inspect.active_queues()
    except Exception:  # the status report must not fail for want of one part
        return None
    counts = dict.fromkeys(QUEUES, 0)
    for queues in (replies or {}).values():
        for queue in queues:
            name = queue.get("name")
            if name in counts:
                counts[name] += 1
    return counts


def recent_turn_ms(rt: Runtime) -> list[float]:
    """Durations of recently ended turns: the recorded list, else a sample of ended turns
    still in Redis (they expire after ``turn_ttl_s``)."""
    recorded = rt.redis.lrange(rt.keys.recent_turn_ms(), 0, _SAMPLE_TURNS - 1)
    if recorded:
        return [float(v) for v in recorded]
    pattern = rt.keys.ended("*")
    durations: list[float] = []
    for scanned, key in enumerate(rt.redis.scan_iter(match=pattern, count=500), 1):
        name = key.decode() if isinstance(key, bytes) else str(key)
        turn_id = name[len(rt.keys.turn("")) :].removesuffix(":ended")
        ms = _run_end_ms(rt, turn_id)
        if ms is not None:
            durations.append(ms)
        if len(durations) >= _SAMPLE_TURNS or scanned >= _SCAN_BUDGET:
            break
    return durations


def _run_end_ms(rt: Runtime, turn_id: str) -> float | None:
    for _id, fields in rt.redis.xrevrange(rt.keys.events(turn_id), count=3) or []:
        raw = fields.get(b"e", fields.get("e")) if isinstance(fields, dict) else None
        if raw is None:
            continue
        event = json.loads(raw)
        if event.get("type") == "run-end" and "ms" in event.get("data", {}):
            return float(event["data"]["ms"])
    return None


@tool(
    examples=(
        "system status",
        "how is the system doing",
        "are the workers running",
        "how busy are you",
    )
)
def system_status() -> str:
    """Report the assistant's own health: queue depths, live workers and recent turn latency."""
    rt = runtime()
    depths = queue_depths(rt)
    parts = ["Waiting in queues: " + ", ".join(f"{q} {n}" for q, n in depths.items()) + "."]
    workers = live_workers(rt)
    if workers is None:
        parts.append("Workers could not be asked.")
    else:
        idle = [q for q, n in workers.items() if n == 0]
        parts.append(
            "Workers: "
            + ", ".join(f"{q} {n}" for q, n in workers.items())
            + "."
            + (f" No worker serves {', '.join(idle)}." if idle else "")
        )
    active = int(rt.redis.zcard(rt.keys.active_turns()))
    parts.append(f"{active} turn{'' if active == 1 else 's'} in progress.")
    timers = int(rt.redis.zcard(rt.keys.timers_due()))
    plural = "" if timers == 1 else "s"
    parts.append(f"{timers} timer{plural} or reminder{plural} pending.")
    durations = recent_turn_ms(rt)
    if durations:
        median = statistics.median(durations)
        worst = max(durations)
        parts.append(
            f"Recent turns ({len(durations)}) took {median / 1000:.1f} s median, "
            f"{worst / 1000:.1f} s at most."
        )
    else:
        parts.append("No recent turn timings.")
    return " ".join(parts)
