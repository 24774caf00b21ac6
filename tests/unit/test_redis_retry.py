"""Redis commands ride out a restart, but a refused password is reported at once."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff

from voxqueue.redis_conn import ReconnectRetry


def calls_until_raised(error: Exception) -> int:
    calls = 0

    def do() -> None:
        nonlocal calls
        calls += 1
        raise error

    retry = ReconnectRetry(NoBackoff(), 5)
    with pytest.raises(type(error)):
        retry.call_with_retry(do, lambda _error: None)
    return calls


def test_connection_errors_are_retried() -> None:
    assert calls_until_raised(redis.ConnectionError("refused")) == 6
    assert calls_until_raised(redis.TimeoutError("slow")) == 6


@pytest.mark.parametrize("error", [
    redis.AuthenticationError("invalid username-password pair"),
    redis.exceptions.AuthorizationError("NOAUTH"),
])
def test_a_refused_password_is_not_retried(error: Exception) -> None:
    assert calls_until_raised(error) == 1


def test_replies_are_parsed_in_c() -> None:
    """The workers' extra brings hiredis, so redis-py parses our replies in C (and kombu's,
    whose connections take redis-py's default parser too)."""
    from redis._parsers import _HiredisParser

    from voxqueue.redis_conn import connect
    from voxqueue.settings import RedisSettings, Settings

    pool = connect(Settings(redis=RedisSettings(url="redis://127.0.0.1:1/0"))
                   ).connection_pool
    connection = pool.connection_class(**pool.connection_kwargs)  # not connected
    assert isinstance(connection._parser, _HiredisParser)
