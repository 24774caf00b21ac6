"""The housekeeping loop on a real Redis: timers fire once and on time, even one added while
the loop sleeps; overdue turns end; a sweep takes turns across processes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from voxqueue.broker.transport import hold_sweep_turn_in
from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.turns import TurnStore
from workers.housekeeping.loop import Housekeeper
from workers.tool_registry.timer_store import TimerStore

DB = 13


@pytest.fixture
def r(redis_server) -> Iterator[redis.Redis]:
    client = redis_server.client(DB)
    yield client
    client.flushdb()
    client.close()


def keeper(r: redis.Redis, max_wait_s: float) -> Housekeeper:
    return Housekeeper(TurnStore(r, Keys("hk"), ttl_s=600), max_wait_s=max_wait_s)


def announcements(r: redis.Redis, owner: str) -> list[dict]:
    stream = TimerStore(r, Keys("hk")).stream_of(owner)
    return [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in r.xrange(stream)]


def test_a_timer_added_while_the_loop_sleeps_fires_on_time_and_once(r):
    loop = keeper(r, max_wait_s=60.0)  # with nothing due it would sleep a minute
    loop.start()
    try:
        time.sleep(0.3)  # asleep now: nothing is due
        due = time.time() + 0.5
        TimerStore(r, Keys("hk")).new("timer", "device:kitchen", "tea", "Tea is ready.", due)
        give_up = time.time() + 10
        while not announcements(r, "device:kitchen"):
            assert time.time() < give_up, "the timer never fired: the loop was not woken"
            time.sleep(0.05)
        late = time.time() - due
        assert late < 5, f"fired {late:.1f} s late (the loop slept past it)"
        time.sleep(0.5)
        assert len(announcements(r, "device:kitchen")) == 1
        assert r.zcard(Keys("hk").timers_due()) == 0
    finally:
        loop.stop()


def test_two_loops_fire_each_timer_once(r):
    store = TimerStore(r, Keys("hk"))
    for i in range(20):
        store.new("timer", "device:hall", f"t{i}", f"Timer {i}.", time.time() + 0.2 + i * 0.01)
    loops = [keeper(r, max_wait_s=0.05), keeper(r, max_wait_s=0.05)]
    for loop in loops:
        loop.start()
    try:
        give_up = time.time() + 10
        while len(announcements(r, "device:hall")) < 20:
            assert time.time() < give_up
            time.sleep(0.05)
        time.sleep(0.3)
        said = [a["e"] for a in announcements(r, "device:hall")]
        assert len(said) == 20 and len(set(said)) == 20
    finally:
        for loop in loops:
            loop.stop()


def test_a_round_sleeps_until_the_soonest_due_time(r):
    loop = keeper(r, max_wait_s=30.0)
    assert loop.round() == pytest.approx(30.0, abs=0.5)  # nothing due: the longest sleep
    TimerStore(r, Keys("hk")).new("timer", "device:x", "soon", "Soon.", time.time() + 2.0)
    assert loop.round() == pytest.approx(2.0, abs=0.5)


def test_one_process_holds_the_sweepers_turn_until_it_stops_renewing_it(r):
    def hold_sweep_turn(*args: object) -> bool:
        return hold_sweep_turn_in(r, *args) == 1

    assert hold_sweep_turn("unacked", "a", 0.3)
    assert not hold_sweep_turn("unacked", "b", 0.3)  # another process
    assert hold_sweep_turn("orphans", "b", 0.3)  # each sweep has its own turn
    for _ in range(3):  # its holder renews it, past the first hold
        time.sleep(0.15)
        assert hold_sweep_turn("unacked", "a", 0.3)
        assert not hold_sweep_turn("unacked", "b", 0.3)
    time.sleep(0.35)  # "a" stopped renewing: the turn is free
    assert hold_sweep_turn("unacked", "b", 0.3)
    assert not hold_sweep_turn("unacked", "a", 0.3)


def test_a_turn_due_before_the_loop_would_wake_wakes_it(r):
    """The loop sleeps up to its longest wait when nothing is due; a turn begun meanwhile with a
    nearer deadline pushes a wake, so it is still ended at its deadline, not at the next look."""
    store = TurnStore(r, Keys("hk"), ttl_s=600)
    loop = Housekeeper(store, max_wait_s=60.0)
    loop.start()
    try:
        time.sleep(0.3)  # asleep now: nothing is due
        now = time.time()
        spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                        created_at=now, deadline=now + 0.5, speak=False)
        store.create(spec)
        give_up = time.time() + 10
        while r.zscore(Keys("hk").active_turns(), spec.turn_id) is not None:
            assert time.time() < give_up, "the overdue turn was never ended"
            time.sleep(0.05)
        assert time.time() - spec.deadline < 5, "ended at the loop's next look, not on time"
    finally:
        loop.stop()


def test_one_loop_at_a_time_does_the_work_and_a_clean_stop_hands_it_over_at_once(r):
    """Every worker process runs the loop; the one holding the turn fires the timers. When it
    stops, a waiting one takes over at once (not when the turn would have lapsed)."""
    first, second = keeper(r, max_wait_s=30.0), keeper(r, max_wait_s=30.0)
    first.start()
    give_up = time.time() + 5
    while not first.holds:
        assert time.time() < give_up, "the first loop never took the turn"
        time.sleep(0.02)
    second.start()
    try:
        time.sleep(0.3)
        assert not second.holds, "two loops held the turn"
        first.stop()
        first._thread.join(35)
        due = time.time() + 0.3
        TimerStore(r, Keys("hk")).new("timer", "device:den", "tea", "Tea is ready.", due)
        give_up = time.time() + 10  # far less than the turn's hold (31.5 s) or a try (30 s)
        while not announcements(r, "device:den"):
            assert time.time() < give_up, "the second loop did not take over"
            time.sleep(0.05)
        assert second.holds and not first.holds
    finally:
        first.stop()
        second.stop()


def test_a_dead_holders_turn_lapses_and_another_loop_takes_over(r):
    hold_sweep_turn_in(r, Keys("hk").housekeeping_turn(), "a-dead-process", 0.5)  # it never renews
    loop = keeper(r, max_wait_s=0.2)
    loop.start()
    try:
        TimerStore(r, Keys("hk")).new("timer", "device:attic", "t", "Time.", time.time())
        time.sleep(0.1)
        assert not loop.holds and not announcements(r, "device:attic")
        give_up = time.time() + 10
        while not announcements(r, "device:attic"):
            assert time.time() < give_up, "the turn never passed on"
            time.sleep(0.05)
        assert loop.holds
    finally:
        loop.stop()
