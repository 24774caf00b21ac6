"""The once-primitive, the fence and the lease, against a real Redis and kombu's real Redis
transport (the consumer around the channel is the only stand-in: Celery's, not ours)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis
from celery.exceptions import SoftTimeLimitExceeded
from kombu import Connection

from testkit.clock import FakeClock, wait_until
from voxqueue.once import Fence, Fenced, Once
from workers.runtime.lease import LeaseKeeper, Running

DB = 4


@pytest.fixture
def r(redis_server) -> Iterator[redis.Redis]:
    client = redis_server.client(DB)
    yield client
    client.close()


def test_once_writes_with_its_claim_and_only_the_first_time(r):
    def append() -> list | None:
        return Once(r, marker="m").call("RPUSH", "list", "a", "b").call("EXPIRE", "list", 60).run()

    assert append() == [2, 1]
    assert append() is None
    assert r.lrange("list", 0, -1) == [b"a", b"b"]
    assert 0 < r.ttl("m") <= 3600


def test_a_stale_attempt_is_fenced_and_writes_nothing(r):
    r.set("attempts", 2)
    with pytest.raises(Fenced):
        Once(r, marker="m", fence=Fence("attempts", 1)).call("SET", "x", "old").run()
    assert not r.exists("m") and not r.exists("x")
    assert Once(r, marker="m", fence=Fence("attempts", 2)).call("SET", "x", "new").run() == [b"OK"]
    assert r.get("x") == b"new"


def test_delifeq_deletes_only_a_lock_we_hold(r):
    r.set("lock", "turn-a")
    Once(r).call("DELIFEQ", "lock", "turn-b").run()
    assert r.get("lock") == b"turn-a"
    Once(r).call("DELIFEQ", "lock", "turn-a").run()
    assert not r.exists("lock")


def test_binary_arguments_survive(r):
    pcm = bytes(range(256)) * 4
    Once(r).call("XADD", "stream", "*", "pcm", pcm).run()
    ((_id, fields),) = r.xrange("stream")
    assert fields[b"pcm"] == pcm


# -- the lease ---------------------------------------------------------------------------------
LEASE_S = 1.0


@pytest.fixture
def held(redis_server) -> Iterator[tuple[Connection, object, str]]:
    """A message delivered by kombu's Redis transport and not acknowledged: what a worker holds."""
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    options = {"visibility_timeout": LEASE_S, "unacked_restore_throttle": 1}
    with Connection(url, transport_options=options) as conn:
        queue = conn.SimpleQueue(f"lease-{uuid.uuid4().hex[:6]}")
        queue.put({"job": 1})
        message = queue.get(timeout=2)
        yield conn, queue, message.delivery_tag
        queue.close()


def consumer_of(queue: object) -> SimpleNamespace:
    return SimpleNamespace(task_consumer=SimpleNamespace(channel=queue.consumer.channel))


def age(queue, tag: str, seconds: float) -> None:
    """Move the delivery's lease back ``seconds``: as if that long went by unrenewed."""
    channel = queue.consumer.channel
    channel.client.zincrby(channel.unacked_index_key, -seconds, tag)


def restore_and_count(queue) -> int:
    """Run kombu's own sweep, as every worker does each second; how many messages are queued."""
    channel = queue.consumer.channel
    channel.qos.restore_visible(num=100, interval=1)
    return int(channel.client.llen(queue.queue.name))


def test_without_renewal_kombu_hands_a_held_message_out_again(held):
    _conn, queue, tag = held
    assert restore_and_count(queue) == 0, "within its lease"
    age(queue, tag, LEASE_S + 0.3)
    assert restore_and_count(queue) == 1


def test_a_renewed_lease_keeps_the_message_and_a_dropped_one_frees_it(held):
    _conn, queue, tag = held
    r = queue.consumer.channel.client
    clock = FakeClock()
    keeper = LeaseKeeper(consumer_of(queue), r, LEASE_S, enforce_limits=True, clock=clock)
    assert tag in keeper.held_tags()
    for _ in range(4):  # twice the lease, renewed every half lease
        age(queue, tag, LEASE_S / 2)
        assert keeper.renew() == 1
    assert restore_and_count(queue) == 0
    # Past its hard time limit the task loses its lease (the threads pool cannot kill it).
    keeper.running["t1"] = Running(tag, threading.get_ident(), clock(), None, 0.5)
    clock.advance(0.4)
    assert keeper.renew() == 1, "within its hard limit"
    clock.advance(0.2)
    assert keeper.renew() == 0
    age(queue, tag, LEASE_S + 0.3)
    assert restore_and_count(queue) == 1


def test_one_renewal_rescores_every_held_delivery_and_puts_back_none_acked(held):
    _conn, queue, first = held
    channel = queue.consumer.channel
    r = channel.client
    for job in (2, 3):
        queue.put({"job": job})
    second, third = (queue.get(timeout=2).delivery_tag for _ in range(2))
    keeper = LeaseKeeper(consumer_of(queue), r, LEASE_S, enforce_limits=False)
    index = channel.unacked_index_key
    r.zrem(index, third)  # acknowledged after the keeper looked: not to be put back
    stale = time.time() - 100
    r.zadd(index, {first: stale, second: stale})
    before = time.time()
    assert keeper.renew() == 3
    scores = dict(r.zrange(index, 0, -1, withscores=True))
    assert set(scores) == {first.encode(), second.encode()}
    assert all(score >= before for score in scores.values())


def test_a_thread_past_its_soft_limit_gets_soft_time_limit_exceeded(r):
    clock = FakeClock()
    keeper = LeaseKeeper(SimpleNamespace(), r, LEASE_S, enforce_limits=True, clock=clock)
    caught: list[BaseException] = []
    started = threading.Event()

    def task() -> None:
        keeper.task_started("t2", None, 0.2, None)
        started.set()
        try:
            for _ in range(500):  # 5 s of Python work, interrupted long before
                time.sleep(0.01)
        except SoftTimeLimitExceeded as exc:
            caught.append(exc)
        finally:
            keeper.task_ended("t2")

    worker = threading.Thread(target=task)
    worker.start()
    assert started.wait(2)
    clock.advance(0.19)
    keeper.renew()
    assert worker.is_alive() and not caught, "interrupted within its soft limit"
    clock.advance(0.02)
    keeper.renew()
    worker.join(3)
    assert not worker.is_alive()
    assert caught and isinstance(caught[0], SoftTimeLimitExceeded)
    assert "t2" not in keeper.running


class Looked(dict[str, object]):
    """kombu's record of delivered messages, counting how often it is looked at."""

    looks = 0

    def __len__(self) -> int:
        self.looks += 1
        return super().__len__()


def test_the_keeper_sleeps_while_nothing_is_held_and_renews_once_a_task_arrives(r):
    delivered = Looked()
    index = f"idx-{uuid.uuid4().hex[:6]}"
    channel = SimpleNamespace(qos=SimpleNamespace(_delivered=delivered),
                              unacked_index_key=index, global_keyprefix="")
    keeper = LeaseKeeper(SimpleNamespace(task_consumer=SimpleNamespace(channel=channel)), r,
                         0.4, enforce_limits=True)
    keeper.start()
    try:
        time.sleep(0.5)  # five quarter leases: an awake loop would have looked each time
        assert delivered.looks == 1, "it looked once, found nothing held, and slept"
        r.zadd(index, {"7": 1.0})
        delivered["7"] = object()
        keeper.task_received()
        # Woken: a quarter lease later, the held message's lease is renewed (stamped now).
        wait_until(lambda: r.zscore(index, "7") != 1.0, "the held message's renewal")
        score = r.zscore(index, "7")
        assert score is not None and score > time.time() - 60
    finally:
        keeper.stop()
        keeper._thread.join(2)
    assert not keeper._thread.is_alive(), "stop wakes the sleeping loop"
