"""The benchmark's delaying proxy (bench/redis_delay.py): every byte passes, in order, no sooner
than the set delay each way, and the commands it passed can be listed."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
import redis

from bench.redis_delay import DelayProxy
from testkit import RedisServer


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


def test_the_proxy_passes_everything_later_and_in_order(redis_server):
    proxy = DelayProxy("127.0.0.1", redis_server.port, record=True).start()
    try:
        client = redis.Redis.from_url(proxy.url(9))
        client.flushdb()
        big = b"x" * 300_000  # many TCP segments each way
        pipe = client.pipeline(transaction=False)
        for i in range(50):
            pipe.rpush("order", i)
        pipe.set("big", big)
        pipe.execute()
        assert [int(v) for v in client.lrange("order", 0, -1)] == list(range(50))
        assert client.get("big") == big
        assert any("RPUSH" in c.words for c in proxy.commands)

        proxy.set_delay(0.02)
        started = time.perf_counter()
        client.ping()
        assert time.perf_counter() - started >= 0.04  # 20 ms each way, never less
    finally:
        proxy.stop()
