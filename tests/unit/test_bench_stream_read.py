"""bench.stream_read's summary: medians per way of reading, and multiples of the base."""

from __future__ import annotations

import pytest

from bench.stream_read import ratios


def test_medians_and_multiples_of_the_base() -> None:
    results = {"paced": [(20.0, 130.0), (24.0, 120.0), (22.0, 140.0)],
               "all there": [(4.0, 14.0), (3.0, 12.0), (5.0, 16.0)]}
    rows = {name: rest for name, *rest in ratios(results, "all there")}
    assert rows["paced"] == pytest.approx([22.0, 130.0, 5.5, 130 / 14])
    assert rows["all there"] == pytest.approx([4.0, 14.0, 1.0, 1.0])


def test_a_base_that_cost_nothing_gives_no_multiple() -> None:
    rows = list(ratios({"a": [(1.0, 2.0)], "b": [(0.0, 0.0)]}, "b"))
    assert rows[0] == ("a", 1.0, 2.0, 0.0, 0.0)
