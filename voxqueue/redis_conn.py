"""Redis connections from the settings' URL (auth and TLS come with the URL)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, AuthorizationError
from redis.retry import Retry

from voxqueue.settings import ClientSettings

T = TypeVar("T")

#: How long a command keeps retrying while Redis is unreachable (a restart takes a second or
#: two): attempts with exponential backoff and jitter, 0.05 s doubling up to 1 s, about 8 s.
RECONNECT_ATTEMPTS = 12


class ReconnectRetry(Retry):
    """Retries connection errors and timeouts, but not a refused password or user.

    redis-py counts ``AuthenticationError`` as a ``ConnectionError``, so a wrong password
    would be retried for the whole reconnection window before it is reported.
    """

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any],
                        is_retryable: Callable[[Exception], bool] | None = None,
                        with_failure_count: bool = False) -> T:
        if is_retryable is None:  # the usual case: no closure per command
            retryable = _not_refused
        else:
            def retryable(error: Exception) -> bool:
                return _not_refused(error) and is_retryable(error)

        return super().call_with_retry(do, fail, retryable, with_failure_count)


def _not_refused(error: Exception) -> bool:
    return not isinstance(error, AuthenticationError | AuthorizationError)


def connect(settings: ClientSettings, *, decode: bool = False) -> redis.Redis:
    """A client with timeouts and keep-alive that rides out a Redis restart.

    Every command is retried on connection errors and timeouts with exponential backoff, so a
    stage or a client in the middle of a turn waits for Redis to come back instead of failing.
    """
    return redis.Redis.from_url(
        settings.redis.url,
        decode_responses=decode,
        socket_timeout=10,
        socket_connect_timeout=2,
        socket_keepalive=True,
        health_check_interval=25,
        retry=ReconnectRetry(ExponentialWithJitterBackoff(cap=1.0, base=0.05),
                             RECONNECT_ATTEMPTS),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
