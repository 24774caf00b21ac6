"""System status: queue depths, live workers, turns in progress and recent turn latency."""

from __future__ import annotations

import json
import statistics

from workers.runtime.resources import Runtime
from workers.tool_registry.context import owner, runtime
from workers.tool_registry.probes import live_workers, queue_depths
from workers.tool_registry.registry import tool

__all__ = ["system_status"]

_SAMPLE_TURNS = 50
_SCAN_BUDGET = 5000


def recent_turn_ms(rt: Runtime) -> list[float]:
    """Durations of recently ended turns: the recorded list, else a sample of ended turns
    still in Redis (they expire after ``turns.ttl_s``)."""
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
    # Only the caller's own: another device's timers are none of its business.
    timers = int(rt.redis.zcard(rt.keys.owner_timers(owner())))
    plural = "" if timers == 1 else "s"
    parts.append(f"{timers} of your timer{plural} or reminder{plural} pending.")
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
