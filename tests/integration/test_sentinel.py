"""A Redis behind real sentinels: the clients (blocking and asyncio, as the gateway's) reach the
primary and follow it to the replica the sentinels promote; ``voxqueue doctor`` and the start
of a process say what the sentinels see (primary, replicas, sentinels, quorum), and one clear
line for each way the address can be wrong (no master name, a master the sentinels do not
know, no sentinel answering). Turns through a failover: test_redis_failover.py."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis
from redis.sentinel import MasterNotFoundError

from testkit.clock import wait_until
from testkit.sentinel import MASTER, SYNC_AT_ONCE, SentinelSet
from testkit.system import free_port
from voxqueue.celery_config import celery_config
from voxqueue.observability.doctor import check_sentinels, diagnose
from voxqueue.redis_conn import (
    RedisAddressError,
    agreed_primary,
    connect,
    connect_async,
    sentinel_address,
)
from voxqueue.settings import RedisSettings, Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sentinels():
    found = SentinelSet()
    yield found
    found.stop()


def settings(url: str, master: str | None = MASTER) -> Settings:
    return Settings(redis=RedisSettings(url=url, master=master))


def test_doctor_shows_the_primary_its_replica_and_the_sentinels(sentinels):
    check = check_sentinels(settings(sentinels.url))
    assert check is not None and check.ok, check
    assert f"primary 127.0.0.1:{sentinels.primary().port}" in check.detail
    replica = next(p for p in sentinels.servers if p != sentinels.primary().port)
    assert f"replicas 127.0.0.1:{replica}" in check.detail
    assert all(f"127.0.0.1:{s.port}" in check.detail for s in sentinels.sentinels)
    found = diagnose(settings(sentinels.url))
    assert [c.name for c in found.checks][:2] == ["redis sentinels", "redis"]
    assert found.checks[1].ok, found.checks[1]


def test_a_client_writes_to_the_primary_and_reads_what_it_wrote(sentinels):
    r = connect(settings(sentinels.url))
    r.set("doctor:probe", "here")
    assert r.get("doctor:probe") == b"here"
    assert r.replica_wait is not None and r.replica_wait.replicas == 1  # durable writes wait


def test_a_master_the_sentinels_do_not_know_is_named(sentinels):
    check = check_sentinels(settings(sentinels.url, master="nosuch"))
    assert check is not None and not check.ok
    assert "know no primary named 'nosuch'" in check.detail
    assert "VOXQUEUE_REDIS_MASTER" in check.detail


def test_no_sentinel_answering_is_said_with_their_addresses():
    ports = [free_port(), free_port()]
    url = ";".join(f"sentinel://127.0.0.1:{p}" for p in ports) + "/0"
    check = check_sentinels(settings(url))
    assert check is not None and not check.ok
    assert check.detail == f"no sentinel answered at 127.0.0.1:{ports[0]}, 127.0.0.1:{ports[1]}"


def test_a_sentinel_url_without_a_master_name_stops_the_start_in_one_line():
    bare = settings("sentinel://127.0.0.1:26379/0", master=None)
    with pytest.raises(RedisAddressError, match="VOXQUEUE_REDIS_MASTER is not set"):
        celery_config(bare)
    with pytest.raises(RedisAddressError, match="not a sentinel address"):
        sentinel_address(settings("sentinel://127.0.0.1:26379;redis://127.0.0.1:6379/0"))
    check = check_sentinels(bare)
    assert check is not None and not check.ok and "VOXQUEUE_REDIS_MASTER" in check.detail


def test_the_gateways_asyncio_client_follows_the_primary_through_a_failover(sentinels):
    """(Last of the module: it leaves the killed server down.)"""
    async def write_and_read(n: int) -> bytes | None:
        r = connect_async(settings(sentinels.url), max_connections=4, timeout=5)
        try:
            await r.set("gateway:probe", f"write {n}")
            return await r.get("gateway:probe")
        finally:
            await r.aclose()

    assert asyncio.run(write_and_read(1)) == b"write 1"
    old = sentinels.primary().port
    sentinels.kill_primary()
    promoted = sentinels.wait_failover()
    assert promoted.port != old
    assert asyncio.run(write_and_read(2)) == b"write 2"
    assert redis.Redis(port=promoted.port).get("gateway:probe") == b"write 2"


@pytest.mark.parametrize(("answers", "sentinels", "primary"), [
    ([("10.0.0.1", 6379), (b"10.0.0.1", b"6379"), ("10.0.0.2", 6379)], 3, ("10.0.0.1", 6379)),
    ([("10.0.0.1", 6379), redis.ConnectionError("refused"), ("10.0.0.1", 6379)], 3,
     ("10.0.0.1", 6379)),
    ([("10.0.0.1", 6379)], 1, ("10.0.0.1", 6379)),  # one address for all (a Kubernetes service)
    ([("10.0.0.1", 6379), ("10.0.0.2", 6379), None], 3, None),  # mid-failover: no majority
    ([("10.0.0.1", 6379), redis.ConnectionError("refused"), redis.TimeoutError()], 3, None),
    ([("10.0.0.1", 6379), ("10.0.0.2", 6379)], 2, None),
])
def test_the_primary_is_the_one_a_majority_of_the_sentinels_names(answers, sentinels, primary):
    if primary is not None:
        assert agreed_primary(answers, sentinels, MASTER) == primary
        return
    with pytest.raises(MasterNotFoundError, match="no majority") as refused:
        agreed_primary(answers, sentinels, MASTER)
    assert isinstance(refused.value, redis.ConnectionError)  # the callers' retries ask again


def test_a_primary_one_sentinel_names_alone_is_not_used_and_doctor_says_why():
    """Three sentinels, three answers (the primary, the replica, none): a client reaches
    neither server and doctor names the disagreement; agreement back, the client writes."""
    found = SentinelSet()
    try:
        primary = found.primary().port
        replica = next(p for p in found.servers if p != primary)
        one, two = (redis.Redis(port=s.port) for s in found.sentinels[1:])
        one.execute_command("SENTINEL", "REMOVE", MASTER)
        one.execute_command("SENTINEL", "MONITOR", MASTER, "127.0.0.1", replica, 2)
        two.execute_command("SENTINEL", "REMOVE", MASTER)
        check = check_sentinels(settings(found.url))
        assert check is not None and not check.ok
        assert "do not agree on a primary" in check.detail, check.detail
        r = connect(settings(found.url), patient=False)
        with pytest.raises(redis.ConnectionError, match="no majority"):
            r.set("split:probe", "x")
        assert redis.Redis(port=replica).get("split:probe") is None
        two.execute_command("SENTINEL", "MONITOR", MASTER, "127.0.0.1", primary, 2)
        r = connect(settings(found.url), patient=False)
        r.set("split:probe", "here")  # two of three name the primary again
        assert redis.Redis(port=primary).get("split:probe") == b"here"
    finally:
        found.stop()


def test_after_a_failover_writes_go_to_the_new_primary_even_when_the_old_one_is_back():
    """The killed primary restarted at once is a primary again, with its old data, until the
    sentinels make it a replica (some ten seconds): a connection that redials it (redis-py's
    does, for a command in flight when the primary died) writes there, and loses the writes
    when it resyncs. Every reconnection asks the sentinels instead."""
    found = SentinelSet()
    try:
        r = connect(settings(found.url))
        ran: list[tuple[float, str, int]] = []  # (when, key, the port of the server that ran it)
        stop = threading.Event()

        def writer(n: int) -> None:  # writes in flight across the kill
            i = 0
            while not stop.is_set():
                i += 1
                with r.pipeline(transaction=False) as pipe:
                    pipe.set(f"w{n}:{i}", "1")
                    pipe.info("server")
                    pipe.execute_command("WAIT", 2, 100)  # (in flight most of the time)
                    port = int(pipe.execute()[1]["tcp_port"])
                ran.append((time.monotonic(), f"w{n}:{i}", port))

        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(3)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(ran) >= 6, "writes before the kill")
        killed = found.kill_primary()
        found.wait_failover()
        killed.extra = SYNC_AT_ONCE  # back at once, as a supervisor would bring it back
        killed.start()
        back = time.monotonic()
        new = found.primary().port
        wait_until(lambda: sum(t > back for t, _, _ in ran) >= 15, "writes after", timeout=20)
        stop.set()
        for thread in threads:
            thread.join(5)
        after = [(key, port) for t, key, port in ran if t > back]
        assert {port for _, port in after} == {new}, f"the primary is {new}: {after}"
        assert redis.Redis(port=new).exists(*(key for key, _ in after)) == len(after)
    finally:
        found.stop()


def test_with_most_sentinels_gone_doctor_says_no_majority_answers_and_clients_wait():
    """Two of three sentinels stopped: no quorum to fail over, and no majority to name the
    primary; doctor says so in one line, and a new client connection is refused."""
    found = SentinelSet()
    try:
        for sentinel in found.sentinels[1:]:
            sentinel.stop()
        check = check_sentinels(settings(found.url))
        assert check is not None and not check.ok
        assert "no majority of the 3 sentinels" in check.detail, check.detail
        with pytest.raises(redis.ConnectionError, match="no majority"):
            connect(settings(found.url), patient=False).set("quorum:probe", "x")
    finally:
        found.stop()
