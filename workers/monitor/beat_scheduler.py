"""Beat's scheduler: celery-redbeat (schedule and lock in Redis) that rides out Redis restarts.

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

log = logging.getLogger("voxqueue.beat")

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
