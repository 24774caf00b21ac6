"""Monitors in beat's schedule (celery-redbeat, in Redis): entries added and removed at run
time and kept across restarts. Each monitor is one entry named ``monitor:<name>`` that sends
``voxqueue.monitor.run_check`` to the ``monitor`` queue every ``every`` seconds."""

from __future__ import annotations

from datetime import timedelta

from celery import Celery
from celery.schedules import schedule
from redbeat import RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf, get_redis

from workers.monitor.monitors import Monitor

RUN_CHECK = "voxqueue.monitor.run_check"


def entry_name(monitor_name: str) -> str:
    return f"monitor:{monitor_name}"


def schedule_monitor(app: Celery, monitor: Monitor) -> None:
    """Create or update the monitor's beat entry (its last run time is kept)."""
    RedBeatSchedulerEntry(
        name=entry_name(monitor.name),
        task=RUN_CHECK,
        schedule=schedule(timedelta(seconds=monitor.every), app=app),
        args=[monitor.name],
        options={"expires": max(1.0, monitor.every)},
        app=app,
    ).save()


def unschedule_monitor(app: Celery, monitor_name: str) -> None:
    RedBeatSchedulerEntry(name=entry_name(monitor_name), app=app).delete()


def is_scheduled(app: Celery, monitor_name: str) -> bool:
    """True when beat's schedule in Redis holds the monitor's entry."""
    conf = ensure_conf(app)
    key = RedBeatSchedulerEntry.generate_key(app, entry_name(monitor_name))
    return get_redis(app).zscore(conf.schedule_key, key) is not None
