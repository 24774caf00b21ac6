"""The Celery app: the only module-level state of the workers.

Each worker process builds one Runtime (``app.runtime``) on first use; tasks reach it through
their own app (``workers.runtime.stage.begin``), tools through their call. Nothing else imports
this module but the task modules (for ``@app.task``).
"""

from __future__ import annotations

from functools import cached_property

from celery import Celery

from voxqueue.celery_config import celery_config
from voxqueue.settings import get_settings
from workers.housekeeping import loop as housekeeping
from workers.housekeeping.beat_scheduler import beat_config
from workers.runtime import lifecycle
from workers.runtime.resources import Runtime
from workers.wiring import runtime_for


class VoxCelery(Celery):
    """A Celery app that owns the worker process's shared resources (clients, models)."""

    @cached_property
    def runtime(self) -> Runtime:
        return runtime_for(get_settings(), self)


app = VoxCelery("workers", set_as_current=True)
lifecycle.install(app, lambda: app.runtime)
housekeeping.install(app, lambda: app.runtime)  # timers and overdue turns: any worker, in turn
app.conf.update(celery_config(get_settings()))
app.conf.update(beat_config(get_settings()))  # beat's schedule and lock live in Redis
app.conf.worker_consumer = "workers.runtime.consumer:Consumer"  # task events in batches
# Beat runs only the monitors a user scheduled: timers and overdue turns are the workers'
# housekeeping loop (workers/housekeeping/loop.py), not a task every second.
app.conf.beat_schedule = {}
app.conf.include = [
    "workers.stt.task",
    "workers.agent.task",
    "workers.tools.task",
    "workers.tts.task",
    "workers.monitor.run",
]
