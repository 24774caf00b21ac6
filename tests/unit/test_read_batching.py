"""When a batched reader pauses: after a read that waited or once the pile is read, and never
for less than two pieces' interval."""

from __future__ import annotations

import pytest

from workers.runtime.batching import BLOCKED_READ_S, READ_PAUSE_S, Arrival


def paced(gap: float, n: int, size: int = 100) -> Arrival:
    """An arrival that saw ``n`` pieces, each waited for, ``gap`` seconds apart (from t=0)."""
    arrival = Arrival()
    for i in range(n):
        arrival.read(size, i * gap, blocked=i > 0)
    return arrival


def test_before_the_pace_is_known_only_a_read_that_waited_is_followed_by_a_pause() -> None:
    arrival = Arrival()
    arrival.read(100, 0.0, blocked=True)  # the first piece: no pace yet
    assert arrival.pause(False, 0.0, 1.0) == 0.0
    assert arrival.pause(True, 0.0, 1.0) == READ_PAUSE_S


def test_once_the_pile_is_read_the_reader_pauses_without_a_read_that_waits() -> None:
    arrival = paced(0.025, 5)  # a piece each 25 ms, up to t=0.1
    # After a 0.2 s pause, at t=0.3: ~8 more pieces came; reading them does not wait.
    for k in range(1, 9):
        arrival.read(100, 0.3 + k * 1e-4, blocked=False)
        assert arrival.pause(False, 0.3 + k * 1e-4, 1.0) == (READ_PAUSE_S if k == 8 else 0.0)


@pytest.mark.parametrize(("gap", "slack", "expected"), [
    (0.025, 0.2, 0.2),  # 8 pieces' worth: worth a pause
    (0.15, 0.2, 0.0),  # fewer than two pieces would come meanwhile: none
    (0.025, 0.005, 0.0),  # the listener cannot wait a sleep's worth
])
def test_a_pause_is_taken_only_when_it_gathers_two_pieces(gap: float, slack: float,
                                                          expected: float) -> None:
    assert paced(gap, 5).pause(True, 4 * gap, slack) == pytest.approx(expected)


def read_all(arrivals: list[float], slack_s: float = 1.0) -> float:
    """Read pieces arriving at these times as the batched readers do (a pause before each
    read, when one is due); returns when the last one was read."""
    arrival, now, waited = Arrival(), 0.0, True
    for at in arrivals:
        now += arrival.pause(waited, now, slack_s)
        waited = at > now + BLOCKED_READ_S
        now = max(now, at) + 1e-4  # a piece already there is read at once
        arrival.read(1, now, waited)
    return now


def test_a_stream_that_speeds_up_is_not_read_at_its_early_pace() -> None:
    """A slow start (a busy machine, a provider's hiccup) sets the pace it reckons with; the
    pile read on a reckoned pace that is too low would be read at that pace, behind the
    stream, for as long as no read waits. It reads the whole pile, waiting once, after two
    pauses on a reckoning."""
    slow = [i * 0.15 for i in range(5)]  # ~7 a second for 0.6 s...
    fast = [0.6 + (i + 1) / 60 for i in range(60)]  # ...then 60 a second for 1 s
    done = read_all(slow + fast)
    assert done - fast[-1] <= 2 * READ_PAUSE_S + 0.01
