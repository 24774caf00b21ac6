"""A benchmark run with a setting (``bench.cpu_per_turn --env``) takes only ``VOXQUEUE_X=value``."""

from __future__ import annotations

import argparse

import pytest

from bench.cpu_per_turn import setting


def test_a_setting_is_taken_as_given():
    assert setting("VOXQUEUE_FIRST_PHRASE_WORDS=0") == "VOXQUEUE_FIRST_PHRASE_WORDS=0"
    assert setting("VOXQUEUE_X=a=b") == "VOXQUEUE_X=a=b"  # the value may hold '='


@pytest.mark.parametrize("bad", ["VOXQUEUE_X", "PATH=/tmp", "=1"])
def test_anything_else_is_refused(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="VOXQUEUE_X=value"):
        setting(bad)
