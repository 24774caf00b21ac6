"""The Celery app: the only module-level state of the workers."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from celery import Celery

from voxqueue.celery_config import MONITOR_SWEEP, celery_config
from voxqueue.settings import get_settings
from workers.monitor.schedule import beat_config

if TYPE_CHECKING:
    from workers.runtime.resources import Runtime


class VoxCelery(Celery):
    """A Celery app that owns the worker process's shared resources (clients, models)."""

    @cached_property
    def runtime(self) -> Runtime:
        from workers.runtime.resources import Runtime

        return Runtime(get_settings())


app = VoxCelery("workers", set_as_current=True)
import workers.runtime.lifecycle  # noqa: E402,F401  (logging and warm-up hooks)

app.conf.update(celery_config(get_settings()))
app.conf.update(beat_config(get_settings()))  # beat's schedule and lock live in Redis
app.conf.beat_schedule = {
    "sweep-overdue-turns": {"task": MONITOR_SWEEP, "schedule": 2.0},
    "fire-timers": {"task": "voxqueue.monitor.fire_timers", "schedule": 1.0},
}
app.conf.include = [
    "workers.stt.task",
    "workers.agent.task",
    "workers.tools.task",
    "workers.tts.task",
    "workers.monitor.task",
    "workers.monitor.timers",
    "workers.monitor.run",
]
