"""Beat's scheduler: celery-redbeat (schedule and lock in Redis) that rides out Redis restarts,
and the settings that select it. A beat started while another holds the lock waits (re-tried
every ``LOOP_S``); a beat that dies without releasing it loses it after ``LOCK_TIMEOUT_S``.

redbeat's tick extends its lock and reads the schedule from Redis; a connection error there
ends the beat process. Here a tick that cannot reach Redis waits a moment and tries again. When
the lock was lost meanwhile (it expired while Redis was down and another beat took it), this
beat steps down, so there is still exactly one.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from redbeat import RedBeatScheduler
from redis.exceptions import LockError

from voxqueue.keys import Keys
from voxqueue.redis_conn import sentinel_address
from voxqueue.settings import Settings

log = logging.getLogger("voxqueue.beat")

#: redbeat's scheduler, riding out Redis restarts (what ``voxqueue up`` runs too).
SCHEDULER = "workers.housekeeping.beat_scheduler:ResilientScheduler"
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

    parts = urlsplit(settings.redis.url)
    url, auth = settings.redis.url, {}
    sentinels = sentinel_address(settings)
    if sentinels is not None:  # RedBeat's own form: its scheduler and lock follow the primary
        url = f"redis-sentinel://{sentinels.sentinels[0][0]}:{sentinels.sentinels[0][1]}/"
        auth = {"sentinels": sentinels.sentinels, "service_name": sentinels.master,
                "db": sentinels.db, "password": sentinels.password,
                "username": sentinels.username,
                "sentinel_kwargs": sentinels.sentinel_kwargs()}
    elif parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username}@{host}" if parts.username else host
        url = urlunsplit(parts._replace(netloc=netloc))
        auth = {"password": unquote(parts.password)}
    return {
        "beat_scheduler": SCHEDULER,
        "beat_max_loop_interval": LOOP_S,
        "redbeat_redis_url": url,
        "redbeat_key_prefix": Keys(settings.redis.key_prefix).redbeat_prefix(),
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


#: Seconds between attempts while Redis is unreachable.
RETRY_S = 1.0


class ResilientScheduler(RedBeatScheduler):
    def tick(self, *args: Any, **kwargs: Any) -> float:
        try:
            return float(super().tick(*args, **kwargs))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("beat: Redis unreachable (%s); retrying in %.0f s", exc, RETRY_S)
            return RETRY_S
        except LockError as exc:
            if self.lock is not None and self._lock_taken_by_another():
                log.error("beat: lost the beat lock to another beat; stopping this one")
                raise SystemExit(1) from exc
            log.warning("beat: lock expired while Redis was away (%s); taking it again", exc)
            if self.lock is not None and self.lock.acquire(blocking=False):
                return RETRY_S
            raise SystemExit(1) from exc

    def _lock_taken_by_another(self) -> bool:
        try:
            holder = self.lock.redis.get(self.lock.name)
        except redis.RedisError:
            return False
        return holder is not None and not self.lock.owned()
