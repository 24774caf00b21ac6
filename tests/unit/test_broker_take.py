"""Taking a message without a gap (voxqueue/broker/transport.py), on a real Redis: a message is
always in its queue, in a channel's in-flight list or in kombu's unacked set, whenever the taker
dies."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from queue import Empty

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Queue
from kombu.utils.eventio import poll as kombu_poll
from kombu.utils.json import dumps

from testkit.clock import wait_until
from voxqueue.broker.transport import INFLIGHT_INDEX, inflight_key, sweep

DB = 13
LEASE_S = 0.6


@pytest.fixture
def url(redis_server) -> Iterator[str]:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    yield url


def connect(url: str) -> Connection:
    return Connection(url, transport="voxqueue.broker.transport:Transport", transport_options={
        "visibility_timeout": LEASE_S, "priority_steps": [0],
        "unacked_restore_interval": 1, "unacked_restore_throttle": 1})


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
        channel._keep_alive([key])  # what the channel does before each take...
        r.blmove(queue.name, key, 1, "RIGHT", "LEFT")  # ...and the take; then it dies
    assert r.llen(queue.name) == 0 and r.llen(key) == 1 and r.hlen("unacked") == 0
    assert sweeps(r) == (0, 0), "its channel is alive for a lease"
    wait_until(lambda: not r.exists(f"{key}.alive"), "the dead channel's lease to lapse")
    assert sweeps(r) == (1, 0)
    assert r.llen(queue.name) == 1 and not r.exists(key)
    assert not r.smembers(INFLIGHT_INDEX)


def sweeps(r: redis.Redis, holder: str = "sweeper") -> tuple[int, int] | None:
    """Messages put back and leases expired (or None: not this holder's turn)."""
    swept = sweep(r, holder, 2.0, unacked_index="unacked_index", lease_s=LEASE_S, limit=10)
    return None if swept is None else swept[:2]


def test_the_sweep_is_one_processs_turn_and_counts_expired_leases(url):
    r = redis.Redis.from_url(url)
    r.delete("_voxqueue.sweep.unacked", "unacked_index")
    assert sweeps(r, "a") == (0, 0)
    assert sweeps(r, "b") is None, "another process holds the sweeper's turn"
    now = time.time()
    r.zadd("unacked_index", {"old": now - LEASE_S - 5, "older": now - LEASE_S - 9,
                             "fresh": now})
    assert sweeps(r, "a") == (0, 2), "two deliveries outlived their lease: kombu restores them"


def test_a_channel_closing_while_it_takes_does_not_wait_for_the_take(url):
    """kombu reads the pending take's reply before closing (up to the take's wait): ours drops
    the connection, and what the take had moved goes back to the head of its queue at once."""
    queue = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="k")
    r = redis.Redis.from_url(url)
    with connect(url) as conn:
        channel = conn.default_channel
        channel.take_wait_s = 60.0  # waiting for the take, closing would last a minute
        Consumer(conn, [queue], callbacks=[lambda b, m: None], accept=["json"]).consume()
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=0.3)  # a take is pending now
        assert channel._in_poll
        key = inflight_key(queue.name, channel._channel_id)
        r.lpush(queue.name, b"older")
        r.lpush(key, b"moved")  # as if the take had just moved a message
        closing = threading.Thread(target=channel.close, daemon=True)
        closing.start()
        closing.join(10)  # a deadline, not a speed
        assert not closing.is_alive(), "closing waited for the take"
    assert r.lrange(queue.name, 0, -1) == [b"older", b"moved"], "next to be taken: the moved one"
    assert not r.exists(key) and not r.exists(f"{key}.alive")
    assert not r.smembers(INFLIGHT_INDEX)


class Loop:
    """The part of kombu's event loop a transport registers with: its timers are recorded."""

    def __init__(self) -> None:
        self.poller = kombu_poll()
        self.on_tick: set = set()
        self.later: list[tuple[float, object]] = []

    def add_reader(self, *args: object) -> None: ...
    def remove_reader(self, *args: object) -> None: ...
    def remove(self, *args: object) -> None: ...

    def call_repeatedly(self, delay: float, fn: object, *args: object) -> object:
        return Timer()

    def call_later(self, delay: float, fn: object, *args: object) -> object:
        self.later.append((delay, fn))
        return Timer()


class Timer:
    def cancel(self) -> None: ...


def test_one_process_sweeps_each_second_the_others_only_try_for_the_turn_when_they_take(url):
    queue = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="k")
    r = redis.Redis.from_url(url)
    other = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="k2")
    loops, channels = [], []
    with connect(url) as first, connect(url) as second:
        other(first.default_channel).declare()  # where the dead worker's message goes back
        for conn in (first, second):
            conn.connect()
            Consumer(conn, [queue], callbacks=[lambda b, m: None], accept=["json"]).consume()
            loop = Loop()
            conn.transport.register_with_event_loop(conn.connection, loop)
            loops.append(loop)
            channel = conn.default_channel
            channel.take_wait_s = 0.1
            channels.append(channel)

        def take(channel: object) -> None:  # one take that finds nothing
            channel.connection.cycle._register_BRPOP(channel)  # as the event loop does
            with pytest.raises(Empty):
                channel._brpop_read()

        assert loops[0].later == [] == loops[1].later, "no timer: nobody holds the turn yet"
        r.zadd("unacked_index", {"tag-of-a-dead-worker": time.time() - 60})
        r.hset("unacked", "tag-of-a-dead-worker", dumps([
            {"body": "", "properties": {"delivery_tag": "t"}}, "x", "k2"]))
        take(channels[0])  # it takes the turn, and sweeps at once: the expired lease is back
        assert r.zcard("unacked_index") == 0
        assert r.llen(other.name) == 1, "back in its queue"
        take(channels[1])
        assert [len(loop.later) for loop in loops] == [1, 0], "the first to take got the turn"
        delay, sweep = loops[0].later.pop()
        assert delay == 1, "and sweeps each second"
        r.zadd("unacked_index", {"tag-of-a-dead-worker": time.time() - 60})
        take(channels[1])  # the other process: not its turn, nothing swept
        assert r.zcard("unacked_index") == 1 and loops[1].later == []
        sweep()  # the sweeper: the expired lease is swept, and the next sweep set
        assert r.zcard("unacked_index") == 0
        assert [d for d, _ in loops[0].later] == [1]
        r.delete("_voxqueue.sweep.unacked")  # the sweeper stopped renewing its turn
        channels[1].takeover_s = 0.0  # (its next try is due at once)
        take(channels[1])
        assert len(loops[1].later) == 1, "the other process took the turn over"
        loops[0].later.pop()[1]()  # the first finds it lost the turn: no more sweeps there
        assert loops[0].later == []


def test_a_process_without_an_event_loop_never_takes_the_sweepers_turn(url):
    """kombu sweeps from a synchronous ``drain_events`` too (a client's ``inspect``): such a
    process could not keep sweeping each second, so it leaves the turn to the workers."""
    r = redis.Redis.from_url(url)
    with connect(url) as conn:
        assert conn.default_channel.qos.restore_visible() is False
    assert r.get("_voxqueue.sweep.unacked") is None


def test_a_take_pending_on_a_queue_no_longer_consumed_does_not_delay_the_next(url):
    """A client's ``inspect`` consumes a new reply queue each time: the take left pending on
    the last one must not hold up the take of the next (it made every other answer late)."""
    first = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="a")
    second = Queue(f"q-{uuid.uuid4().hex[:6]}", Exchange("x", type="direct"), routing_key="b")
    r = redis.Redis.from_url(url)
    got: list = []
    with connect(url) as conn:
        channel = conn.default_channel
        channel.take_wait_s = 60.0  # behind the dropped take, the next would wait a minute
        consumer = Consumer(conn, [first], callbacks=[lambda b, m: None], accept=["json"])
        consumer.consume()
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=0.3)  # a take of `first` is pending now
        key = inflight_key(first.name, channel._channel_id)
        r.lpush(key, b"moved")  # as if that take had just moved a message
        consumer.cancel()
        assert r.lrange(first.name, 0, -1) == [b"moved"], "what it moved is back in its queue"
        Consumer(conn, [second], callbacks=[lambda b, m: got.append(b)], accept=["json"],
                 no_ack=True).consume()
        publish(url, second, {"n": 3})
        conn.drain_events(timeout=10)  # socket.timeout: it waited behind the dropped one
    assert got == [{"n": 3}]
