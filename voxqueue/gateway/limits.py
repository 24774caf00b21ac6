"""Turns per minute per device, counted in Redis so that every gateway replica shares them."""

from __future__ import annotations

import time

import redis

from voxqueue.keys import Keys


class RateLimiter:
    """A fixed one-minute window per device: simple, shared, and bounded in memory."""

    def __init__(self, r: redis.Redis, keys: Keys, per_minute: int) -> None:
        self.r = r
        self.keys = keys
        self.per_minute = per_minute

    def hit(self, device: str) -> int:
        """Count one request; 0 when allowed, else the seconds until the next window."""
        now = time.time()
        window = int(now // 60)
        key = self.keys.device_rate(device, window)
        pipe = self.r.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, 120)
        count, _ = pipe.execute()
        if int(count) <= self.per_minute:
            return 0
        return max(1, int((window + 1) * 60 - now) + 1)
