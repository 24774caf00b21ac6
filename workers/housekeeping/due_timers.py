"""Firing due timers and reminders, each exactly once."""

from __future__ import annotations

import time

import structlog

from workers.tool_registry.timer_store import Item, TimerStore

log = structlog.get_logger("voxqueue.monitor")


def fire_due(timers: TimerStore) -> list[Item]:
    """Announce every due timer and reminder on its owner's stream; returns those fired here
    (firing claims each item in one script, so several firing processes never repeat one)."""
    fired = timers.fire_due()
    for item in fired:
        log.info("timer fired", id=item.id, kind=item.kind, owner=item.owner,
                 late_s=round(time.time() - item.due, 3))
    return fired
