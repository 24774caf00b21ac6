"""The Celery app of what runs no task, beat and Flower: voxqueue's Celery settings and beat's
schedule in Redis, without the task modules and providers that ``workers.app`` loads (beat
sends a monitor's task by its name; Flower knows tasks from their events). ``voxqueue up``
runs Flower with it, and beat on a thread of its own process (``voxqueue.up.in_process``).
"""

from __future__ import annotations

from voxqueue.celery_config import make_celery
from voxqueue.settings import get_settings
from workers.housekeeping.beat_scheduler import beat_config
from workers.monitor import beat_start  # noqa: F401  (the settings' monitors, synced at beat start)

app = make_celery(get_settings(), "workers")
app.conf.update(beat_config(get_settings()))
app.conf.beat_schedule = {}  # as workers.app: only the monitors a user scheduled, in Redis
