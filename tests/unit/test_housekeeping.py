"""The housekeeping loop on a real Redis: timers fire once and on time, even one added while
the loop sleeps; overdue turns end; a sweep takes turns across processes. A round's timing is
driven by a fake clock; the loop's thread is waited on through its ``looks``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from testkit.clock import FakeClock, wait_until
from voxqueue.broker.sweeps import sweep_turn_holder
from voxqueue.broker.transport import hold_sweep_turn_in
from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys
from voxqueue.turns import TurnStore
from workers.housekeeping.due_timers import fire_due
from workers.housekeeping.loop import Housekeeper
from workers.tool_registry.timer_store import TimerStore

DB = 13


@pytest.fixture
def r(redis_server) -> Iterator[redis.Redis]:
    client = redis_server.client(DB)
    yield client
    client.flushdb()
    client.close()


def patient(r: redis.Redis) -> redis.Redis:
    """A client like ``r`` whose reads wait longer than any loop here sleeps: a loop woken
    early was woken, not cut short by its socket's timeout (redis-py's default is 5 s)."""
    kw = r.connection_pool.connection_kwargs
    return redis.Redis(host=kw["host"], port=kw["port"], db=kw["db"], socket_timeout=120)


def keeper(r: redis.Redis, max_wait_s: float, clock: FakeClock | None = None) -> Housekeeper:
    return Housekeeper(TurnStore(patient(r), Keys("hk"), ttl_s=600), max_wait_s=max_wait_s,
                       clock=clock or time.time)


def announcements(r: redis.Redis, owner: str) -> list[dict]:
    stream = TimerStore(r, Keys("hk")).stream_of(owner)
    return [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in r.xrange(stream)]


def test_a_timer_added_while_the_loop_sleeps_fires_on_time_and_once(r):
    loop = keeper(r, max_wait_s=60.0)  # with nothing due it would sleep a minute
    loop.start()
    try:
        wait_until(lambda: loop.looks >= 1, "the loop's first round")  # asleep: nothing is due
        due = time.time() + 0.5
        TimerStore(r, Keys("hk")).new("timer", "device:kitchen", "tea", "Tea is ready.", due)
        # Unwoken, the loop would sleep out its minute: 10 s is a deadline, not a speed.
        wait_until(lambda: announcements(r, "device:kitchen"),
                   "the timer to fire (the loop was not woken)")
        wait_until(lambda: loop.looks >= 3, "the loop's rounds after the wake")
        assert len(announcements(r, "device:kitchen")) == 1
        assert r.zcard(Keys("hk").timers_due()) == 0
        assert fire_due(TimerStore(r, Keys("hk")), due + 3600) == [], "nothing left to fire"
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
        wait_until(lambda: len(announcements(r, "device:hall")) >= 20, "the 20 timers")
        looked = [loop.looks for loop in loops]  # both look again: a second firing would show
        wait_until(lambda: all(loop.looks >= n + 2 for loop, n in zip(loops, looked)),
                   "two more looks by each loop")
        said = [a["e"] for a in announcements(r, "device:hall")]
        assert len(said) == 20 and len(set(said)) == 20
    finally:
        for loop in loops:
            loop.stop()


def test_a_round_sleeps_until_the_soonest_due_time(r):
    clock = FakeClock(time.time())
    loop = keeper(r, max_wait_s=30.0, clock=clock)
    assert loop.round() == 30.0  # nothing due: the longest sleep
    TimerStore(r, Keys("hk")).new("timer", "device:x", "soon", "Soon.", clock() + 2.0)
    assert loop.round() == pytest.approx(2.0)
    clock.advance(1.5)
    assert loop.round() == pytest.approx(0.5)


def test_a_round_fires_a_timer_and_ends_a_turn_when_due_and_not_before(r):
    clock = FakeClock(time.time())
    store = TurnStore(r, Keys("hk"), ttl_s=600)
    loop = Housekeeper(store, max_wait_s=30.0, clock=clock)
    TimerStore(r, Keys("hk")).new("timer", "device:y", "tea", "Tea.", clock() + 5.0)
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                    created_at=clock(), deadline=clock() + 8.0, speak=False)
    store.create(spec)
    clock.advance(4.99)
    assert loop.round() == pytest.approx(0.01)
    assert not announcements(r, "device:y"), "fired before it was due"
    clock.advance(0.01)
    assert loop.round() == pytest.approx(3.0), "fired: next, the turn's deadline"
    assert loop.round() == pytest.approx(3.0)
    assert len(announcements(r, "device:y")) == 1, "fired once, however many rounds look"
    clock.advance(2.9)
    loop.round()
    assert r.zscore(Keys("hk").active_turns(), spec.turn_id) is not None, "ended early"
    clock.advance(0.1)
    assert loop.round() == 30.0, "nothing is left: the longest sleep"
    assert r.zscore(Keys("hk").active_turns(), spec.turn_id) is None, "not ended at its deadline"
    assert r.get(Keys("hk").ended(spec.turn_id)) == b"timeout"


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
    wait_until(lambda: sweep_turn_holder(r, "unacked") is None, "the turn to lapse (Redis TTL)")
    assert hold_sweep_turn("unacked", "b", 0.3)
    assert not hold_sweep_turn("unacked", "a", 0.3)


def test_a_turn_due_before_the_loop_would_wake_wakes_it(r):
    """The loop sleeps up to its longest wait when nothing is due; a turn begun meanwhile with a
    nearer deadline pushes a wake, so it is still ended at its deadline, not at the next look."""
    store = TurnStore(patient(r), Keys("hk"), ttl_s=600)
    loop = Housekeeper(store, max_wait_s=60.0)
    loop.start()
    try:
        wait_until(lambda: loop.looks >= 1, "the loop's first round")  # asleep: nothing is due
        now = time.time()
        spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                        created_at=now, deadline=now + 0.5, speak=False)
        store.create(spec)
        # Unwoken, the loop would look again in a minute: 10 s is a deadline, not a speed.
        wait_until(lambda: r.zscore(Keys("hk").active_turns(), spec.turn_id) is None,
                   "the overdue turn to end (the loop was not woken)")
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
        wait_until(lambda: second.looks >= 1, "the second loop's try for the turn")
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
        wait_until(lambda: loop.looks >= 1, "the loop's first try for the turn")
        assert not loop.holds and not announcements(r, "device:attic")
        give_up = time.time() + 10
        while not announcements(r, "device:attic"):
            assert time.time() < give_up, "the turn never passed on"
            time.sleep(0.05)
        assert loop.holds
    finally:
        loop.stop()
