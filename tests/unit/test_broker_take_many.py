"""The take from several lists (voxqueue/broker/transport.py, voxqueue/broker/take.py) and the dead
letters (voxqueue/broker/dead_letters.py), on a real Redis: a channel consuming several queues takes
without a gap, wakes at a publish, and puts an item that is not a message in the dead letters in
the same step that takes it off its in-flight list."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Queue

from testkit.clock import wait_until
from voxqueue.broker import dead_letters
from voxqueue.broker.dead_letters import DEAD_LETTER, bury, doctor_rows
from voxqueue.broker.take import take_any_command, taken
from voxqueue.broker.transport import INFLIGHT_INDEX, NO_KEYPREFIX, inflight_key, sweep
from voxqueue.contracts.dead_letter import DeadLetter

DB = 12
LEASE_S = 0.6
X = Exchange("x", type="direct")


@pytest.fixture
def url(redis_server) -> Iterator[str]:
    url = redis_server.url[:-1] + str(DB)
    redis.Redis.from_url(url).flushdb()
    yield url


def connect(url: str, **options: object) -> Connection:
    return Connection(url, transport="voxqueue.broker.transport:Transport", transport_options={
        "visibility_timeout": LEASE_S, "priority_steps": [0],
        "unacked_restore_interval": 1, "unacked_restore_throttle": 1, **options})


def queues(n: int) -> list[Queue]:
    tag = uuid.uuid4().hex[:6]
    return [Queue(f"q{i}-{tag}", X, routing_key=f"k{i}-{tag}") for i in range(n)]


def publish(url: str, queue: Queue, body: object, **kw: object) -> None:
    with connect(url) as conn:
        conn.Producer().publish(body, exchange=queue.exchange, routing_key=queue.routing_key,
                                declare=[queue], serializer="json", **kw)


def drain(conn: Connection, got: list, n: int, timeout: float = 5) -> None:
    give_up = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < give_up, f"{len(got)} of {n} messages"
        with contextlib.suppress(TimeoutError):
            conn.drain_events(timeout=0.5)


def test_a_channel_on_several_queues_takes_from_each_without_a_trace_in_flight(url):
    qs = queues(3)
    for i, q in enumerate(qs):
        publish(url, q, {"n": i})
    r = redis.Redis.from_url(url)
    got: list = []
    with connect(url) as conn, Consumer(conn, qs, callbacks=[lambda b, m: got.append(m)],
                                        accept=["json"]):
        drain(conn, got, 3)
        assert sorted(m.payload["n"] for m in got) == [0, 1, 2]
        keys = r.smembers(INFLIGHT_INDEX)
        assert len(keys) == 3, "one in-flight list per queue, each marked alive"
        assert all(r.llen(k) == 0 for k in keys), "each message left its in-flight list"
        assert r.hlen("unacked") == 3
        for m in got:
            m.ack()
    assert r.hlen("unacked") == 0


def test_the_script_takes_the_first_non_empty_list_in_order_or_returns_the_bells_ids(url):
    r = redis.Redis.from_url(url)
    lists = ["a", "b", "c"]
    inflight = [f"in.{n}" for n in lists]
    args = take_any_command(lists, inflight)[1:]
    r.xadd("_voxqueue.bell.b", {"r": "1"}, id="5-1")
    assert taken(r.eval(*args)) is None
    assert r.eval(*args) == [b"0-0", b"5-1", b"0-0"], "every list empty: the bells' last ids"
    r.lpush("c", b"c1")
    r.lpush("b", b"b1", b"b2")
    assert taken(r.eval(*args)) == (1, b"b1"), "the first non-empty list, its oldest item"
    assert r.lrange("in.b", 0, -1) == [b"b1"]
    assert taken(r.eval(*args)) == (1, b"b2")
    assert taken(r.eval(*args)) == (2, b"c1")


def test_a_publish_wakes_a_channel_waiting_on_several_queues_at_once(url):
    """Between the script (all empty) and the wait on the doorbells nothing is missed: the
    wait starts from the ids the script saw. A push without a ring is found within a take."""
    qs = queues(2)
    r = redis.Redis.from_url(url)
    got: list = []
    with connect(url) as conn, Consumer(conn, qs, callbacks=[lambda b, m: got.append(b)],
                                        accept=["json"], no_ack=True):
        channel = conn.default_channel
        channel.take_wait_s = 60.0  # unwoken, the take would find it a minute later
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=0.3)  # the script found nothing: waiting on the bells
        assert channel._take_stage == "bell"
        publish(url, qs[1], {"n": 1})
        conn.drain_events(timeout=10)  # socket.timeout: the ring did not wake the take
        assert got == [{"n": 1}]
        channel.take_wait_s = 0.3
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=5.2)  # the pending 5 s wait runs out (no ring)
        r.lpush(qs[0].name, json.dumps(envelope({"n": 2}, qs[0])))  # another client: no ring
        drain(conn, got, 2, timeout=3)
        assert got[1] == {"n": 2}
    assert not any(r.llen(k) for k in r.smembers(INFLIGHT_INDEX))


def envelope(body: object, queue: Queue) -> dict:
    """A kombu message envelope as kombu's virtual transport writes it."""
    return {"body": base64.b64encode(json.dumps(body).encode()).decode(),
            "content-encoding": "utf-8", "content-type": "application/json", "headers": {},
            "properties": {"body_encoding": "base64", "delivery_tag": uuid.uuid4().hex,
                           "delivery_mode": 2, "priority": 0,
                           "delivery_info": {"exchange": "x", "routing_key": queue.name}}}


def test_a_message_moved_by_a_taker_of_several_queues_that_died_comes_back(url):
    qs = queues(2)
    publish(url, qs[1], {"n": 3})
    r = redis.Redis.from_url(url)
    with connect(url) as conn:
        channel = conn.default_channel
        names = [q.name for q in qs]
        inflight = [inflight_key(n, channel._channel_id) for n in names]
        channel._keep_alive(inflight)  # what the channel does before each take...
        assert taken(r.eval(*take_any_command(names, inflight)[1:])) is not None  # ...it dies
    assert r.llen(qs[1].name) == 0 and r.llen(inflight[1]) == 1
    assert sweep(r, "s", 2.0, unacked_index="unacked_index", lease_s=LEASE_S,
                 limit=10)[:2] == (0, 0), "its channel is alive for a lease"
    wait_until(lambda: not any(r.exists(f"{k}.alive") for k in inflight),
               "the dead channel's lease to lapse")
    assert sweep(r, "s", 2.0, unacked_index="unacked_index", lease_s=LEASE_S,
                 limit=10)[:2] == (1, 0)
    assert r.llen(qs[1].name) == 1
    assert r.xlen(f"_voxqueue.bell.{qs[1].name}") == 1, "the sweep rang its queue's bell"


def test_several_priority_steps_are_taken_without_a_gap(url):
    (q,) = queues(1)
    r = redis.Redis.from_url(url)
    got: list = []
    with connect(url, priority_steps=[0, 5]) as conn:
        conn.Producer().publish({"p": 0}, exchange=X, routing_key=q.routing_key, declare=[q],
                                priority=0)
        conn.Producer().publish({"p": 9}, exchange=X, routing_key=q.routing_key, priority=9)
        assert r.llen(q.name) == 1 and r.llen(f"{q.name}\x06\x165") == 1
        with Consumer(conn, [q], callbacks=[lambda b, m: got.append(b)], accept=["json"],
                      no_ack=True):
            drain(conn, got, 2)
    assert got == [{"p": 0}, {"p": 9}], "the lists in kombu's order of priority steps"
    assert not any(r.llen(k) for k in r.smembers(INFLIGHT_INDEX))


def test_a_global_keyprefix_is_refused_with_the_fix(url):
    with pytest.raises(ValueError, match="global_keyprefix") as refused, \
            connect(url, global_keyprefix="app:") as conn:
        conn.default_channel
    assert str(refused.value) == NO_KEYPREFIX and "VOXQUEUE_REDIS_URL" in NO_KEYPREFIX


POISON = [b"garbage", b"\xff\xfe not utf-8", b"[1, 2]", b'"a string"', b'{"a": 1}',
          b'{"properties": {"delivery_tag": "t"}}']


@pytest.mark.parametrize("n_queues", [1, 2], ids=["one queue (BLMOVE)", "several (script)"])
def test_items_that_are_not_messages_go_to_the_dead_letters_and_the_take_goes_on(url,
                                                                                 n_queues):
    qs = queues(n_queues)
    r = redis.Redis.from_url(url)
    for item in POISON:
        r.lpush(qs[-1].name, item)
    publish(url, qs[-1], {"fine": True})  # behind the poison
    got: list = []
    with connect(url) as conn, Consumer(conn, qs, callbacks=[lambda b, m: got.append(m)],
                                        accept=["json"]):
        drain(conn, got, 1)
        assert [m.payload for m in got] == [{"fine": True}]
        got[0].ack()
    found = [DeadLetter.model_validate_json(e) for e in r.lrange(DEAD_LETTER, 0, -1)]
    assert len(found) == len(POISON)
    assert {d.queue for d in found} == {qs[-1].name}
    kept = [d.item.encode() if d.item is not None else base64.b64decode(d.item_b64 or "")
            for d in reversed(found)]
    assert kept == POISON, "each kept whole, newest first"
    reasons = [d.reason for d in reversed(found)]
    assert reasons[:2] == ["not JSON"] * 2
    assert reasons[2] == "JSON list, not a message envelope"
    assert reasons[4:] == ["not a message kombu can deliver (KeyError: 'properties')",
                           "not a message kombu can deliver (KeyError: 'exchange')"]
    assert found[-1].head == "garbage"
    assert not any(r.llen(k) for k in r.smembers(INFLIGHT_INDEX)), "none left in flight"
    assert r.hlen("unacked") == 0


def test_bury_moves_an_item_in_one_step_only_if_it_is_still_in_flight(url, monkeypatch):
    r = redis.Redis.from_url(url)
    monkeypatch.setattr(dead_letters, "DEAD_LETTER_MAX", 3)
    r.lpush("in", b"x" * 100, b"other")
    assert bury(r, "in", "stt", b"x" * 100, "not JSON")
    assert r.lrange("in", 0, -1) == [b"other"]
    assert not bury(r, "in", "stt", b"x" * 100, "again"), "handed back by a sweep meanwhile"
    assert r.llen(DEAD_LETTER) == 1
    for i in range(5):
        r.lpush("in", f"{i}".encode())
        bury(r, "in", "tts", f"{i}".encode(), "not JSON")
    assert r.llen(DEAD_LETTER) == 3, "bounded: the newest kept"
    rows = doctor_rows(r, newest=2)
    assert rows[0][:2] == ("dead letters", False) and "3 queue item(s)" in rows[0][2]
    assert [row[0] for row in rows[1:]] == ["dead letter: tts"] * 2
    assert rows[1][2].endswith(" not JSON: 4")
    r.delete(DEAD_LETTER)
    assert doctor_rows(r) == [("dead letters", True, "none", "")]


def test_a_no_ack_consumer_that_raises_gets_its_error_and_no_dead_letter(url):
    """A message made and handed to a no-ack consumer is delivered: an error of the consumer
    is the consumer's, not a sign of an item that is not a message."""
    (q,) = queues(1)
    publish(url, q, {"n": 4})
    r = redis.Redis.from_url(url)

    def fails(body: object, message: object) -> None:
        raise RuntimeError("the consumer's own error")

    with connect(url) as conn, Consumer(conn, [q], callbacks=[fails], accept=["json"],
                                        no_ack=True), \
            pytest.raises(RuntimeError, match="own error"):
        conn.drain_events(timeout=3)
    assert r.llen(DEAD_LETTER) == 0
    assert not any(r.llen(k) for k in r.smembers(INFLIGHT_INDEX)), "delivered: not in flight"


@pytest.mark.parametrize("n_queues", [1, 2], ids=["one queue (BLMOVE)", "several (script)"])
def test_what_a_take_moved_comes_back_when_its_reply_was_lost_with_its_connection(url,
                                                                                  n_queues):
    """The channel lives on (kombu reconnects it) and keeps its in-flight lists alive, so no
    lease sweep would put back what the lost take had moved: its next take does, first."""
    qs = queues(n_queues)
    r = redis.Redis.from_url(url)
    got: list = []
    with connect(url) as conn, Consumer(conn, qs, callbacks=[lambda b, m: got.append(b)],
                                        accept=["json"], no_ack=True):
        channel = conn.default_channel
        channel.take_wait_s = 5.0
        with pytest.raises(socket.timeout):
            conn.drain_events(timeout=0.3)  # a take is pending
        key = inflight_key(qs[-1].name, channel._channel_id)
        r.lpush(key, json.dumps(envelope({"n": 5}, qs[-1])))  # as if it had moved a message
        channel.client.connection.disconnect()  # and its reply was lost (kombu's health check)
        drain(conn, got, 1)
    assert got == [{"n": 5}]
    assert not r.exists(key)
