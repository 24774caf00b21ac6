"""Firing due timers and reminders, each exactly once."""

from __future__ import annotations

import time

import structlog

from workers.tool_registry.timer_store import Item, TimerStore

log = structlog.get_logger("voxqueue.monitor")


def fire_due(timers: TimerStore, now: float | None = None) -> list[Item]:
    """Announce every timer and reminder due by ``now`` (epoch seconds; default: the time) on
    its owner's stream; returns those fired here (firing claims each item in one script, so
    several firing processes never repeat one)."""
    when = time.time() if now is None else now
    fired = timers.fire_due(when)
    for item in fired:
        log.info("timer fired", id=item.id, kind=item.kind, owner=item.owner,
                 late_s=round(when - item.due, 3))
    return fired
