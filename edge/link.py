"""Is the server reachable? One flag per dependency, told once per outage, and a backoff."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import redis
from kombu.exceptions import OperationalError

from voxqueue.client.direct import Unavailable
from voxqueue.redis_conn import connect
from voxqueue.settings import ClientSettings

_UNREACHABLE = (
    Unavailable,
    redis.ConnectionError,
    redis.TimeoutError,
    OperationalError,
    ConnectionError,
    TimeoutError,
)


def is_connection_error(exc: BaseException) -> bool:
    """True for errors that mean "the server cannot be reached", not "the request was bad"."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _UNREACHABLE):
            return True
        seen = seen.__cause__
    return False


def redis_answers(settings: ClientSettings, timeout_s: float = 1.0) -> bool:
    """One PING without retries: is Redis (the primary, with sentinels) there right now?"""
    r = connect(settings, patient=False, socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s)
    try:
        return bool(r.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        r.close()


class Link:
    """Tracks one dependency (Redis, the workers); calls ``on_down``/``on_up`` on changes only."""

    def __init__(
        self, name: str, on_down: Callable[[str, str], None], on_up: Callable[[str], None]
    ) -> None:
        self.name = name
        self._on_down = on_down
        self._on_up = on_up
        self._up = True
        self._lock = threading.Lock()
        self.outages = 0

    @property
    def up(self) -> bool:
        return self._up

    def ok(self) -> None:
        with self._lock:
            changed, self._up = not self._up, True
        if changed:
            self._on_up(self.name)

    def failed(self, reason: str) -> bool:
        """Record a failure; True when this one began an outage (and the user was told)."""
        with self._lock:
            changed, self._up = self._up, False
            if changed:
                self.outages += 1
        if changed:
            self._on_down(self.name, reason)
        return changed


class Backoff:
    """Exponential delays with jitter between reconnection attempts, reset on success."""

    def __init__(self, first_s: float = 0.5, max_s: float = 5.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self.max_s, self._next * 2)
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._next = self.first_s
