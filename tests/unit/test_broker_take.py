"""Taking a message without a gap (voxqueue/broker.py), on a real Redis: a message is always in
its queue, in a channel's in-flight list or in kombu's unacked set, whenever the taker dies."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Queue

from voxqueue.broker import INFLIGHT_INDEX, inflight_key, return_orphans

DB = 13
LEASE_S = 0.6


@pytest.fixture
def url(redis_server) -> Iterator[str]:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    yield url


def connect(url: str) -> Connection:
    return Connection(url, transport="voxqueue.broker:Transport", transport_options={
        "visibility_timeout": LEASE_S, "priority_steps": [0]})


def publish(url: str, queue: Queue, body: dict) -> None:
    with connect(url) as conn:
        conn.Producer().publish(body, exchange=queue.exchange, routing_key=queue.routing_key,
                                declare=[queue], serializer="json")


def test_a_taken_message_goes_to_unacked_and_leaves_no_trace_in_flight(url):
    queue = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="k")
    publish(url, queue, {"n": 1})
    got = []
    with connect(url) as conn, Consumer(conn, [queue], callbacks=[lambda b, m: got.append(m)],
                                        accept=["json"]):
        conn.drain_events(timeout=3)
        r = redis.Redis.from_url(url)
        assert [m.payload for m in got] == [{"n": 1}]
        (key,) = r.smembers(INFLIGHT_INDEX)
        assert key.decode().startswith(f"_voxqueue.inflight.{queue.name}.")
        assert r.llen(key) == 0, "removed from the in-flight list once in unacked"
        assert r.hlen("unacked") == 1
        got[0].ack()
        assert r.hlen("unacked") == 0


def test_a_message_moved_by_a_taker_that_died_comes_back_after_a_lease(url):
    queue = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="k")
    publish(url, queue, {"n": 2})
    r = redis.Redis.from_url(url)
    with connect(url) as conn:
        channel = conn.default_channel
        key = inflight_key(queue.name, channel._channel_id)
        channel._keep_alive(key)  # what the channel does before each take...
        r.blmove(queue.name, key, 1, "RIGHT", "LEFT")  # ...and the take; then it dies
    assert r.llen(queue.name) == 0 and r.llen(key) == 1 and r.hlen("unacked") == 0
    assert return_orphans(r) == 0, "its channel is alive for a lease"
    time.sleep(LEASE_S + 0.2)
    assert return_orphans(r) == 1
    assert r.llen(queue.name) == 1 and not r.exists(key)
    assert not r.smembers(INFLIGHT_INDEX)
