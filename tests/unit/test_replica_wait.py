"""Durable writes wait for a replica (Redis ``WAIT``) when there is one to fail over to: a
once-write and a published job are on the replica when they return; with no replica they go on
after ``VOXQUEUE_REDIS_WAIT_MS``, unconfirmed and logged."""

from __future__ import annotations

import logging
import signal
import time
import uuid

import pytest
import redis
from kombu import Connection

from testkit.clock import wait_until
from testkit.system import RedisServer, wait_synced
from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.once import Once
from voxqueue.redis_conn import SHORT_WAIT_MS, connect, replicas_to_wait
from voxqueue.settings import RedisSettings, Settings
from voxqueue.turns import TurnStore


@pytest.fixture(scope="module")
def pair():
    """A primary and one replica of it."""
    primary = RedisServer()
    primary.start()
    replica = RedisServer()
    replica.extra = ("--replicaof", "127.0.0.1", str(primary.port))
    replica.start()
    wait_synced(replica.port)
    yield primary, replica
    replica.stop(signal.SIGKILL)  # a test replica: nothing to keep
    primary.stop()


def settings(url: str, **redis: object) -> Settings:
    return Settings(redis=RedisSettings(url=url, **redis))  # type: ignore[arg-type]


def test_the_default_waits_only_for_sentinels_replicas():
    assert replicas_to_wait(settings("redis://127.0.0.1:6379/0")) == 0
    sentinel = settings("sentinel://127.0.0.1:26379/0", master="m")
    assert replicas_to_wait(sentinel) == 1
    assert replicas_to_wait(settings("redis://h/0", wait_replicas=2)) == 2


def test_a_once_write_is_on_the_replica_when_it_returns(pair):
    primary, replica = pair
    r = connect(settings(primary.url, wait_replicas=1))
    for n in range(20):
        Once(r, marker=f"m:{n}").call("SET", f"k:{n}", str(n)).run()
        # No sleep, no poll: WAIT returned only once the replica had it.
        assert replica_get(replica, f"k:{n}") == str(n).encode()


def test_with_no_replica_a_once_write_goes_on_unconfirmed_and_says_so(caplog):
    lonely = RedisServer()
    lonely.start()
    try:
        r = connect(settings(lonely.url, wait_replicas=1, wait_ms=50))
        with caplog.at_level(logging.WARNING, logger="voxqueue.redis"):
            done = Once(r, marker="m").call("SET", "k", "v").run()
        assert done is not None
        assert r.get("k") == b"v"
        assert "a once-write is on 0 of 1 replicas" in caplog.text
        assert f"(primary 127.0.0.1:{lonely.port})" in caplog.text  # which server it was
    finally:
        lonely.stop()


def test_a_published_job_is_on_the_replica_when_the_publish_returns(pair):
    primary, replica = pair
    with Connection(primary.url, transport="voxqueue.broker.transport:Transport",
                    transport_options={"replicas_to_wait": 1, "replica_wait_ms": 1000}) as conn:
        queue = conn.SimpleQueue(f"wait-{time.time()}")
        for n in range(10):
            queue.put({"n": n})
            assert replica_llen(replica, queue.queue.name) == n + 1
        queue.close()


def replica_get(replica: RedisServer, key: str) -> bytes | None:
    value = redis.Redis(port=replica.port).get(key)
    return value if isinstance(value, bytes) or value is None else bytes(value)


def replica_llen(replica: RedisServer, key: str) -> int:
    return int(redis.Redis(port=replica.port).llen(key))


def test_after_a_wait_that_found_too_few_replicas_writes_wait_briefly_until_one_is_back(
        caplog):
    lonely = RedisServer()
    lonely.start()
    replica = RedisServer()
    try:
        r = connect(settings(lonely.url, wait_replicas=1, wait_ms=800))
        wait = r.replica_wait
        assert wait is not None and wait.timeout_ms(r) == 800
        with caplog.at_level(logging.WARNING, logger="voxqueue.redis"):
            for n in range(5):
                Once(r, marker=f"m:{n}").call("SET", f"k:{n}", "v").run()
        assert wait.timeout_ms(r) == SHORT_WAIT_MS, "no replica: nothing to wait long for"
        assert caplog.text.count("replicas after 800 ms") == 1, caplog.text
        replica.extra = ("--replicaof", "127.0.0.1", str(lonely.port))
        replica.start()
        wait_synced(replica.port)
        link = redis.Redis(port=replica.port)
        primary = redis.Redis(port=lonely.port)  # (its own view lags the replica's a little)
        wait_until(lambda: primary.info("replication").get("slave0", {}).get("state")
                   == "online", "the primary to see its replica online")
        wait._checked = 0.0  # (the primary is asked at most every RECHECK_S)
        assert wait.timeout_ms(r) == 800, "the replica is back in sync: waits are whole again"
        Once(r, marker="m:back").call("SET", "k:back", "v").run()
        assert link.get("k:back") == b"v"
    finally:
        replica.stop(signal.SIGKILL)  # a test replica: nothing to keep
        lonely.stop()


def test_a_new_turn_is_on_the_replica_before_its_first_job_is_sent(pair):
    primary, replica = pair
    r = connect(settings(primary.url, wait_replicas=1))
    store = TurnStore(r, Keys("wait"), ttl_s=600)
    for n in range(10):
        spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=f"s{n}", input="text", text="hi",
                        created_at=time.time(), deadline=time.time() + 30)
        store.create(spec)
        # The primary's own record of what the replica acknowledged (replicas report it once
        # a second unless a WAIT asks): it covers the turn when create returns.
        assert_acked_by_replica(primary)
        assert redis.Redis(port=replica.port).hget(Keys("wait").turn(spec.turn_id), "spec")


def assert_acked_by_replica(primary: RedisServer) -> None:
    """The primary's own record of what the replica acknowledged covers every write so far
    (replicas report it once a second unless a WAIT asks, so an unwaited write is not)."""
    info = redis.Redis(port=primary.port).info("replication")
    assert info["slave0"]["offset"] >= info["master_repl_offset"] - probe_bytes(), info


def probe_bytes() -> int:
    """What may follow the turn in the replication stream: the probe PUBLISH."""
    return 64


def test_a_pieces_number_is_on_the_replica_before_its_job_can_be_sent(pair):
    """The allocation that numbers a piece of speech (the failover run found a piece's number
    lost with the primary while its job survived: the next piece got the same number, and the
    turn ended one sentence early)."""
    from workers.runtime import completion
    from workers.wiring import runtime_for

    primary, replica = pair
    rt = runtime_for(settings(primary.url, wait_replicas=1))
    turn_id = uuid.uuid4().hex
    for n in range(10):
        piece = completion.allocate(rt, turn_id, f"1:{n}")
        assert piece.seq == n and piece.new
        assert_acked_by_replica(primary)
        assert replica_get(replica, rt.keys.marker(turn_id, f"seq:1:{n}")) == f"{n}:1".encode()


def test_a_timers_firing_is_on_the_replica_when_it_returns(pair):
    from workers.tool_registry.timer_store import TimerStore

    primary, replica = pair
    r = connect(settings(primary.url, wait_replicas=1))
    keys = Keys(f"fire-{uuid.uuid4().hex[:6]}")
    store = TimerStore(r, keys)
    item = store.new("timer", "s1", "tea", "Your tea is ready.", due=time.time() - 1)
    fired = store.fire_due()
    assert_acked_by_replica(primary)
    assert [i.id for i in fired] == [item.id]
    # Claimed on the replica too: a primary lost now cannot let the new one fire it again.
    assert redis.Redis(port=replica.port).zscore(keys.timers_due(), item.id) is None
