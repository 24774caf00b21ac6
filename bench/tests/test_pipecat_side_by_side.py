"""The side-by-side bench's own arithmetic: the floor, the turns' names, the split into hops."""

from __future__ import annotations

from typing import Any

import pytest

from bench import pipecat_side_by_side as sbs


def test_the_floor_is_the_first_sentence_of_the_profile() -> None:
    assert sbs.first_sentence_token(sbs.reply_of(sbs.tag_of(7))) == 17
    assert sbs.floor_s() == pytest.approx(0.30 + 17 / 50 + 0.15)


def test_each_turn_has_a_name_no_other_contains() -> None:
    tags = [sbs.tag_of(i) for i in range(3000)]
    assert len(set(tags)) == len(tags)
    assert len({len(t) for t in tags}) == 1  # same length: none is inside another


def test_a_turn_is_split_by_the_fake_s_timestamps() -> None:
    tag = sbs.tag_of(3)
    reply = sbs.reply_of(tag)
    k = sbs.first_sentence_token(reply)
    chat: dict[str, Any] = {"route": "chat", "ts": 10.010,
            "json": {"messages": [{"role": "user", "content": f"weather for {tag}?"}]},
            "sent_ts": [10.31 + 0.02 * i for i in range(30)]}
    other = {**chat, "json": {"messages": [{"role": "user", "content": "weather for Zz?"}]}}
    last_token = chat["sent_ts"][k]
    tts = {"route": "tts", "ts": last_token + 0.005, "json": {"text": f"The forecast {tag} …"},
           "sent_ts": [last_token + 0.16]}
    turn = {"t0": 10.0, "first_audio": last_token + 0.162, "last_audio": 12.0}
    got = sbs.split(turn, [other, chat, tts], tag, sbs.floor_s())
    assert got["question → LLM request"] == pytest.approx(10)
    assert got["last token of sentence → TTS request"] == pytest.approx(5)
    assert got["TTS first byte → client audio"] == pytest.approx(2)
    # The fake's lateness on the profile plus the hops make the overhead.
    late = got["providers, late on the profile"]
    assert got["overhead"] == pytest.approx(10 + 5 + 2 + late)
