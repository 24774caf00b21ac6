"""kombu's Redis transport, hardened against a failure seen on a Redis restart.

When the broker connection drops, a channel already released by its connection may still be
used: to restore its unacknowledged messages while closing, or to acknowledge a task that
finished meanwhile. kombu 5.7 then fails with ``AttributeError`` (no connection parameters),
which Celery treats as unrecoverable, and the worker exits. Raising a connection error instead
lets Celery do what it does for any connection error: log it and reconnect. The message stays
in kombu's ``unacked`` set and comes back after the visibility timeout; every stage is
idempotent, so running it again only finds its turn already done.
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, *args: Any, **kwargs: Any) -> Any:
        if self.connection is None or self.connection.client is None:
            raise redis.ConnectionError("the broker channel was closed by a reconnection")
        return super()._connparams(*args, **kwargs)


class Transport(kombu_redis.Transport):
    Channel = Channel
