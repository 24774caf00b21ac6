"""bench.sections' hooks: every part it times exists, and a part's calls and steps are counted
with the thread's CPU."""

from __future__ import annotations

import itertools
import time

import pytest

from bench import section_hooks
from bench.section_hooks import SECTIONS, target, timed, timed_steps


@pytest.mark.parametrize(("module", "attribute"), [(s[2], s[3]) for s in SECTIONS])
def test_every_timed_part_is_there(module: str, attribute: str) -> None:
    owner, name = target(module, attribute)
    assert callable(getattr(owner, name))


def test_a_part_of_a_row_follows_it() -> None:
    # A row's indented parts come right after it, so the table reads as a tree.
    for queue in {s[0] for s in SECTIONS}:
        labels = [s[1] for s in SECTIONS if s[0] == queue]
        assert not labels[0].startswith(" ")
        depths = [len(label) - len(label.lstrip()) for label in labels]
        assert all(b <= a + 2 for a, b in itertools.pairwise(depths))


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_calls_and_steps_are_counted_with_their_cpu_not_their_waits() -> None:
    section_hooks.reset()
    work = timed("work", lambda: spin(0.02))
    work()
    work()

    def pieces() -> object:
        yield 1
        time.sleep(0.05)  # a wait: no CPU
        yield 2

    assert list(timed_steps("read", pieces)()) == [1, 2]
    totals = section_hooks.totals()
    assert totals["work"][1] == 2 and totals["work"][0] >= 0.04
    assert totals["read"][1] == 3  # two pieces and the end
    assert totals["read"][0] < 0.02
    section_hooks.reset()
    assert section_hooks.totals() == {}


def test_a_reader_that_stops_early_closes_what_it_read() -> None:
    closed = []

    def pieces() -> object:
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    source = pieces()  # held here too, so only a close() ends it, not its last reference
    steps = timed_steps("read", lambda: source)()
    assert next(steps) == 1
    steps.close()  # type: ignore[attr-defined]
    assert closed == [True]


def test_collections_are_counted_under_their_own_row() -> None:
    import gc

    section_hooks.reset()
    callback = section_hooks._time_collections()
    gc.callbacks.append(callback)
    try:
        cycles = []
        for _ in range(20000):  # objects in cycles, for the collector to find
            node: list[object] = []
            node.append(node)
            cycles.append(node)
        del cycles
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    cpu_s, collections = section_hooks.totals()[section_hooks.GC_LABEL]
    assert collections >= 1 and cpu_s > 0
