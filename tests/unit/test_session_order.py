"""The session's line, against a real Redis: turns of one session take it one at a time and
in the order they were created, and a turn that ended while waiting never blocks the line."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.turns import TurnStore

DB = 14


@pytest.fixture
def store(redis_server) -> Iterator[TurnStore]:
    r = redis.Redis.from_url(redis_server.url[:-1] + str(DB))
    r.flushdb()
    yield TurnStore(r, Keys("vq-order"), ttl_s=60)
    r.close()


def new_turn(store: TurnStore, session: str, at: float) -> TurnSpec:
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id=session, input="text", text="hi",
                    created_at=at, deadline=at + 60, speak=False)
    store.create(spec)
    return spec


def test_a_later_turn_waits_for_the_older_one_even_when_the_session_is_free(store):
    now = time.time()
    first, second = new_turn(store, "s", now), new_turn(store, "s", now + 0.001)
    assert store.take_session(second, 30) is False  # the older turn has not reached the agent
    assert store.take_session(first, 30) is True
    assert store.take_session(first, 30) is True  # the holder asking again keeps it
    assert store.take_session(second, 30) is False  # held
    store.release_session("s", first.turn_id)
    assert store.take_session(second, 30) is True


def test_an_older_turn_that_ended_before_the_agent_does_not_block_the_line(store):
    now = time.time()
    failed, later = new_turn(store, "s", now), new_turn(store, "s", now + 0.001)
    assert store.take_session(later, 30) is False
    store.finish(failed, "error", ("stt-empty", "nothing was heard"))
    assert store.take_session(later, 30) is True
    assert store.r.zcard(store.keys.session_waiting("s")) == 0


def test_a_waiting_turn_whose_state_expired_is_dropped_from_the_line(store):
    now = time.time()
    lost, later = new_turn(store, "s", now), new_turn(store, "s", now + 0.001)
    store.r.zrem(store.keys.active_turns(), lost.turn_id)  # as if its keys had expired
    assert store.take_session(later, 30) is True


def test_sessions_have_their_own_lines(store):
    now = time.time()
    new_turn(store, "a", now)
    other = new_turn(store, "b", now + 0.001)
    assert store.take_session(other, 30) is True


def test_the_lock_expires_with_the_turns_deadline(store):
    spec = new_turn(store, "s", time.time())
    assert store.take_session(spec, 7) is True
    assert 0 < store.r.ttl(store.keys.session_lock("s")) <= 7


def test_an_announcement_does_not_join_the_line(store):
    now = time.time()
    announcement = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                            created_at=now, deadline=now + 60, speak=True)
    store.create(announcement, agent=False)
    later = new_turn(store, "s", now + 0.001)
    assert store.take_session(later, 30) is True
