"""The floor's two shapes of reading the voice (``bench.voice_connection``) move the same audio:
a request per piece, and one input stream per turn fed the later pieces through Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bench import cpu_floor
from tests.fakes import FakeProviders
from tests.fakes.provider_server import spoken_pcm

DB = 11
PIECES = ["Tomorrow will be sunny", "in Lisbon with a high of twenty four degrees.",
          "Expect a light breeze from the west."]


def audio_bytes(text: str) -> int:
    """What the fake voice speaks for one generation of ``text`` (16 kHz, 16-bit)."""
    return len(spoken_pcm(text))


@pytest.fixture
def floor(redis_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    client = redis_server.client(DB)
    with FakeProviders() as fake:
        monkeypatch.setattr(cpu_floor, "_redis", lambda: client)
        monkeypatch.setattr(cpu_floor, "_voice", cpu_floor._voice.__wrapped__)  # uncached
        monkeypatch.setattr(cpu_floor, "_voice_settings", cpu_floor._voice_settings.__wrapped__)
        monkeypatch.setenv("ELEVENLABS_API_KEY", "el-test")
        monkeypatch.setenv("VOXQUEUE_ELEVENLABS_BASE_URL", fake.elevenlabs_base_url)
        yield client


def relayed(r: redis.Redis, turn: str) -> tuple[list[int], list[int]]:
    """The audio chunks' sizes and the pieces ended, from the turn's stream."""
    sizes, ends = [], []
    for _, fields in r.xrange(f"floor:{turn}"):
        if b"a" in fields:
            sizes.append(len(fields[b"a"]))
        else:
            ends.append(int(fields[b"end"]))
    return sizes, ends


def test_one_connection_per_turn_relays_every_piece_in_the_turns_chunks(
        floor: redis.Redis) -> None:
    turn = uuid.uuid4().hex
    total = sum(audio_bytes(p) for p in PIECES)
    chunks = [[640, 8000, 16000], [8000, 32000], [64000]]  # per piece
    for later in PIECES[1:]:  # as the agent's step sends them
        floor.rpush(f"floor:{turn}:text", later)
    cpu_floor.floor_speak_ws.run(turn, PIECES[0], chunks, 0.0)
    sizes, ends = relayed(floor, turn)
    assert sum(sizes) == total
    assert sorted(ends) == [0, 1, 2]
    assert 640 in sizes and sizes.count(8000) == 2  # the pieces' own chunks
    assert not floor.exists(f"floor:{turn}:text")


def test_a_request_per_piece_relays_the_same_audio(floor: redis.Redis) -> None:
    turn = uuid.uuid4().hex
    for seq, piece in enumerate(PIECES):
        cpu_floor.floor_speak_read.run(turn, seq, piece, [640, 8000], 0.0)
    sizes, ends = relayed(floor, turn)
    assert sum(sizes) == sum(audio_bytes(p) for p in PIECES)
    assert ends == [0, 1, 2]
