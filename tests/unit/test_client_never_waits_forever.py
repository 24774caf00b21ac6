"""A waiting client always returns: even from a turn ended with no ``run-end`` left to read."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from voxqueue.client.direct import Client, Turn
from voxqueue.contracts import TurnSpec
from voxqueue.settings import RedisSettings, Settings

DB = 8


@pytest.fixture
def client(redis_server) -> Iterator[Client]:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    with Client(Settings(redis=RedisSettings(url=url))) as made:
        yield made


def test_a_turn_ended_without_its_run_end_is_ended_locally(client):
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                    created_at=now - 30, deadline=now - 10, speak=False)
    client.store.create(spec)
    client.redis.set(client.keys.ended(spec.turn_id), b"ok")  # ended; its events are gone
    results: list = []
    waiting = threading.Thread(target=lambda: results.append(Turn(client, spec).wait()),
                               daemon=True)
    waiting.start()
    waiting.join(30)  # a deadline, not a speed: waiting for an event that never comes is forever
    assert not waiting.is_alive(), "the client waited on"
    (result,) = results
    assert result.status == "timeout"
    assert result.error is not None and result.error["code"] == "timeout"


def test_finish_writes_the_end_flag_and_run_end_together(client):
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s2", input="text", text="hi",
                    created_at=now, deadline=now + 30, speak=False)
    client.store.create(spec)
    client.redis.set(client.keys.session_lock("s2"), spec.turn_id)
    assert client.store.finish(spec, "ok") is True
    assert client.store.finish(spec, "error") is False
    types = [e.event.type for e in client.store.history(spec.turn_id)]
    assert types == ["run-start", "run-end"]
    assert client.redis.get(client.keys.ended(spec.turn_id)) == b"ok"
    assert not client.redis.exists(client.keys.session_lock("s2")), "the session is free"
    assert client.redis.zscore(client.keys.active_turns(), spec.turn_id) is None
