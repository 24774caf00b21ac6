"""The floor with the providers' streams, read in batches: a pause follows only a read that
had to wait, and only once pausing is allowed; every piece comes out, in order."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bench import cpu_floor


def arriving(waits: list[float]) -> Iterator[int]:
    """Pieces 0, 1, … each after its wait (0: already there)."""
    for i, wait in enumerate(waits):
        if wait:
            time.sleep(wait)
        yield i


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    taken: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if seconds == 0.2:  # the reader's pause; the pieces' own waits sleep for real
            taken.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(cpu_floor.time, "sleep", sleep)
    return taken


def test_a_pause_follows_each_read_that_waited(pauses: list[float]) -> None:
    got = list(cpu_floor._in_batches(arriving([0.02, 0, 0, 0.02, 0]), 0.2))
    assert got == [0, 1, 2, 3, 4]
    assert pauses == [0.2, 0.2]  # after pieces 0 and 3, not after the piled-up ones


def test_no_pause_before_pausing_is_allowed_or_without_a_pause(pauses: list[float]) -> None:
    allowed: list[bool] = []
    got = list(cpu_floor._in_batches(arriving([0.02, 0.02, 0.02]), 0.2, lambda: bool(allowed)))
    assert got == [0, 1, 2] and pauses == []
    allowed.append(True)
    assert list(cpu_floor._in_batches(arriving([0.02, 0.02]), 0.2, lambda: bool(allowed))) == [0, 1]
    assert pauses == [0.2, 0.2]
    assert list(cpu_floor._in_batches(arriving([0.02, 0.02]), 0.0)) == [0, 1]
    assert pauses == [0.2, 0.2]


def test_the_floors_pause_is_the_workers_longest() -> None:
    from workers.runtime.batching import READ_PAUSE_S

    assert cpu_floor.PAUSE_S == READ_PAUSE_S
