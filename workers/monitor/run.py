"""The ``monitor`` queue's check task. (The monitors of the settings are synced at beat start
by :mod:`workers.monitor.beat_start`, imported here so that the workers' app has it too.)"""

from __future__ import annotations

import structlog
from celery import Task

from voxqueue.celery_config import TIME_LIMITS
from workers.app import app
from workers.monitor import checks
from workers.monitor.alerts import Alerter
from workers.monitor.beat_start import monitors_from_settings, sync_monitors
from workers.monitor.monitors import MonitorStore
from workers.monitor.schedule import RUN_CHECK, unschedule_monitor
from workers.runtime.stage import runtime_of

log = structlog.get_logger("voxqueue.monitor")


@app.task(name=RUN_CHECK, bind=True, time_limit=TIME_LIMITS["monitor"], ignore_result=True)
def run_check(self: Task, name: str) -> str:
    """Check one monitor and alert on a change of state; returns the state."""
    rt = runtime_of(self)
    monitor = MonitorStore(rt.redis, rt.keys).get(name)
    if monitor is None:  # deleted: drop its beat entry too
        unschedule_monitor(rt.celery, name)
        return "deleted"
    result = checks.run_check(monitor, rt)
    change = Alerter(rt.redis, rt.keys, rt.settings.turns.session_ttl_s).record(monitor, result)
    if change.alerted:
        log.warning("monitor alert", monitor=name, old=change.old, new=change.new, text=change.text)
    return result.state


__all__ = ["monitors_from_settings", "run_check", "sync_monitors"]
