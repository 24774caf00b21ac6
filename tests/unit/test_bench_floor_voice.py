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

DB = 11
PIECES = ["Tomorrow will be sunny", "in Lisbon with a high of twenty four degrees.",
          "Expect a light breeze from the west."]


def audio_bytes(text: str) -> int:
    return int(max(0.2, 0.06 * len(text)) * 16000) * 2  # what the fake speaks for it


@pytest.fixture
def floor(redis_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    client = redis_server.client(DB)
    with FakeProviders() as fake:
        monkeypatch.setattr(cpu_floor, "_redis", lambda: client)
        monkeypatch.setattr(cpu_floor, "_voice", cpu_floor._voice.__wrapped__)  # uncached
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
    chunks = [640, 8000, 16000, 32000, 64000]
    for later in PIECES[1:]:  # as the agent's step sends them
        floor.rpush(f"floor:{turn}:text", later)
    cpu_floor.floor_speak_ws.run(turn, PIECES[0], chunks, len(PIECES), 0.0)
    sizes, ends = relayed(floor, turn)
    assert sum(sizes) == total
    assert sizes[:len(chunks)] == chunks  # then what is left, at once
    assert ends == [0, 1, 2]
    assert not floor.exists(f"floor:{turn}:text")


def test_a_request_per_piece_relays_the_same_audio(floor: redis.Redis) -> None:
    turn = uuid.uuid4().hex
    for seq, piece in enumerate(PIECES):
        cpu_floor.floor_speak_read.run(turn, seq, piece, [640, 8000], 0.0)
    sizes, ends = relayed(floor, turn)
    assert sum(sizes) == sum(audio_bytes(p) for p in PIECES)
    assert ends == [0, 1, 2]


class CountingSocket:
    """A socket that counts its reads."""

    def __init__(self, sock: Any) -> None:
        self.sock, self.reads = sock, 0

    def recv(self, n: int) -> bytes:
        self.reads += 1
        return bytes(self.sock.recv(n))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_the_floors_websocket_reads_what_piled_up_in_one_read() -> None:
    """A pause lets the voice's frames pile up; the next read takes them all."""
    import json
    import time

    from bench.ws_reader import WebSocket

    with FakeProviders(profile={"tts_ttfb_s": 0.0, "tts_rtf": 0.0}) as fake:
        url = fake.elevenlabs_base_url.replace("http", "ws", 1)
        with WebSocket(f"{url}/v1/text-to-speech/v/stream-input?output_format=pcm_16000",
                       {"xi-api-key": "el-test"}) as ws:
            ws.sock = counting = CountingSocket(ws.sock)  # type: ignore[assignment]
            ws.send(json.dumps({"text": " "}))
            ws.send(json.dumps({"text": "A sentence of about three seconds of speech."}))
            ws.send(json.dumps({"text": ""}))
            time.sleep(0.5)  # everything is sent meanwhile
            got = [json.loads(m) for m in ws]
    assert got[-1] == {"isFinal": True} and len(got) > 25
    assert counting.reads <= 4
