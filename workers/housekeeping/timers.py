"""Beat's every-second task: fire due timers and reminders (each exactly once)."""

from __future__ import annotations

import time

import structlog
from celery import Task

from voxqueue.celery_config import FIRE_TIMERS, TIME_LIMITS
from workers.app import app
from workers.runtime.stage import runtime_of
from workers.toolkit.timer_store import TimerStore

log = structlog.get_logger("voxqueue.monitor")


@app.task(name=FIRE_TIMERS, bind=True, time_limit=TIME_LIMITS["monitor"], expires=5,
          ignore_result=True)
def fire_timers(self: Task) -> int:
    """Announce every due timer and reminder on its device's stream; returns how many fired."""
    rt = runtime_of(self)
    fired = TimerStore(rt.redis, rt.keys).fire_due()
    for item in fired:
        log.info(
            "timer fired",
            id=item.id,
            kind=item.kind,
            owner=item.owner,
            late_s=round(time.time() - item.due, 3),
        )
    return len(fired)
