"""How much audio a listener has yet to play before a sentence, as the turn records it with
each chunk (``TurnStore.audio_ahead``): read by a later sentence's TTS task to size its first
chunk (``workers/tts/chunking.py``), on a real Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from voxqueue.contracts import TurnEvent, TurnSpec
from voxqueue.keys import Keys
from voxqueue.turns import TurnStore

DB = 12
SECOND = 32000  # bytes of 16 kHz 16-bit audio


@pytest.fixture
def store(redis_server) -> Iterator[TurnStore]:  # type: ignore[no-untyped-def]
    r = redis.Redis.from_url(redis_server.url.rsplit("/", 1)[0] + f"/{DB}")
    yield TurnStore(r, Keys(f"vq-ahead-{uuid.uuid4().hex[:6]}"), ttl_s=60)


def new_turn(store: TurnStore) -> str:
    now = time.time()
    spec = TurnSpec(turn_id=uuid.uuid4().hex, session_id="s", input="text", text="hi",
                    created_at=now, deadline=now + 30, speak=True)
    store.create(spec)
    return spec.turn_id


def ahead(store: TurnStore, turn_id: str, seq: int) -> float:
    pipe = store.r.pipeline(transaction=False)
    store.audio_ahead_in(pipe, turn_id, seq)
    marks, now = pipe.execute()
    return store.audio_ahead(marks, now)


def chunk(store: TurnStore, turn_id: str, seq: int, offset: int, n: int) -> None:
    store.emit_unless_stopped(turn_id, "tts-chunk", {"seq": seq, "offset": offset, "bytes": n},
                              pcm=b"\x00" * n, audio_end=(seq, offset + n))


def test_the_audio_before_a_sentence_counts_from_the_turns_first_chunk(store):
    turn = new_turn(store)
    assert ahead(store, turn, 1) == 0.0  # nothing went out yet
    chunk(store, turn, 0, 0, SECOND)
    chunk(store, turn, 0, SECOND, SECOND)  # sentence 0: 2 s so far
    chunk(store, turn, 2, 0, 3 * SECOND)  # a later sentence's audio is not before sentence 1
    first = ahead(store, turn, 1)
    assert 1.5 < first <= 2.0
    chunk(store, turn, 1, 0, SECOND)
    assert 2.5 < ahead(store, turn, 2) <= 3.0  # sentences 0 and 1
    time.sleep(0.3)
    assert ahead(store, turn, 1) <= first - 0.25  # the listener played on meanwhile


def test_a_chunk_written_after_the_turn_was_cancelled_marks_nothing(store):
    turn = new_turn(store)
    store.cancel(turn)
    chunk(store, turn, 0, 0, SECOND)
    assert ahead(store, turn, 1) == 0.0


def test_a_chunk_sent_again_by_a_retry_is_written_once(store):
    """A failover can lose the reply of a chunk's write after the write reached the replica
    that is promoted: the client's retry sends the same call again, which writes nothing."""
    turn = new_turn(store)
    event = TurnEvent(type="tts-chunk", turn_id=turn, data={"seq": 0, "offset": 0, "bytes": 4})
    keys, args = store._emit_call(event, b"\x00" * 4, None, stop_on_cancel=True,
                                  audio_end=(0, 4))
    assert store.emitted(turn, store._emit(keys=keys, args=args)) == "emitted"
    assert store.emitted(turn, store._emit(keys=keys, args=args)) == "emitted"  # the retry
    chunks = [e for e in store.history(turn) if e.event.type == "tts-chunk"]
    assert len(chunks) == 1
    chunk(store, turn, 0, 4, 4)  # the next chunk: a call of its own
    assert len([e for e in store.history(turn) if e.event.type == "tts-chunk"]) == 2
