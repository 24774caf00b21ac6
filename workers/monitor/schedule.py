"""Beat's schedule in Redis (celery-redbeat): entries added and removed at run time, kept
across restarts, and a lock so that exactly one beat sends them.

Each monitor is one entry named ``monitor:<name>`` that sends ``voxqueue.monitor.run_check``
to the ``monitor`` queue every ``every`` seconds. Another beat started meanwhile waits for the
lock (re-tried every ``LOOP_S``); a beat that dies without releasing it loses it after
``LOCK_TIMEOUT_S``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import Celery
from celery.schedules import schedule
from redbeat import RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf, get_redis

from voxqueue.keys import Keys
from voxqueue.settings import Settings
from workers.monitor.monitors import Monitor

RUN_CHECK = "voxqueue.monitor.run_check"
#: redbeat's scheduler, riding out Redis restarts (what ``voxqueue up`` runs too).
SCHEDULER = "workers.monitor.beat_scheduler:ResilientScheduler"
#: Longest sleep between beat ticks, in seconds (also how often a waiting beat tries the lock).
LOOP_S = 5
#: The lock expires this long after the beat holding it last extended it.
LOCK_TIMEOUT_S = 30


def beat_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for a Redis-backed beat on the settings' Redis (same DB).

    The password goes in ``redbeat_redis_options``, not in the URL: Celery censors nested
    option names holding "pass", but not ``redbeat_redis_url``, which ``celery inspect conf``
    and Flower's worker page would show.
    """
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(settings.redis_url)
    url, auth = settings.redis_url, {}
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username}@{host}" if parts.username else host
        url = urlunsplit(parts._replace(netloc=netloc))
        auth = {"password": unquote(parts.password)}
    return {
        "beat_scheduler": SCHEDULER,
        "beat_max_loop_interval": LOOP_S,
        "redbeat_redis_url": url,
        "redbeat_key_prefix": Keys(settings.key_prefix).redbeat_prefix(),
        "redbeat_lock_timeout": LOCK_TIMEOUT_S,
        "redbeat_redis_options": {
            "socket_timeout": 10,
            "socket_connect_timeout": 5,
            "socket_keepalive": True,
            "health_check_interval": 25,
            "retry_on_timeout": True,
            **auth,
        },
    }


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
