"""Re-chunking TTS audio: few chunks from a fast provider, no gap at the listener from a slow
one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.runtime.batching import READ_PAUSE_S
from workers.tts.chunking import FIRST_CHUNK_BYTES, MAX_CHUNK_BYTES, rechunk

RATE = 16000
PIECE = 3200  # the provider sends 100 ms of audio at a time


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def provider(clock: Clock, seconds: float, rtf: float, ttfb: float = 0.1) -> Iterator[bytes]:
    """``seconds`` of audio in 100 ms pieces, produced ``rtf`` times as slow as real time."""
    clock.now += ttfb
    for _ in range(int(seconds * 10)):
        yield b"\x01\x00" * (PIECE // 2)
        clock.now += 0.1 * rtf


def play(clock: Clock, seconds: float, rtf: float,
         busy_s: float | None = None) -> tuple[list[int], float]:
    """Chunk sizes, and the longest silence a listener playing them as they come would hear
    (``busy_s``: the listener first plays that much of earlier sentences' audio)."""
    sizes: list[int] = []
    playing_until: float | None = None if busy_s is None else clock.now + busy_s
    worst_gap = 0.0
    busy_until = None if busy_s is None else clock.now + busy_s
    for chunk in rechunk(provider(clock, seconds, rtf), clock=clock, rate=RATE,
                         busy_until=busy_until):
        sizes.append(len(chunk))
        if playing_until is None:
            playing_until = clock.now
        worst_gap = max(worst_gap, clock.now - playing_until)
        playing_until = max(playing_until, clock.now) + len(chunk) / 2 / RATE
    return sizes, worst_gap


@pytest.mark.parametrize("rtf", [0.25, 0.5, 0.9, 1.0])
def test_listener_never_runs_dry_while_the_provider_keeps_up(rtf: float) -> None:
    sizes, worst_gap = play(Clock(), seconds=6.0, rtf=rtf)
    assert sum(sizes) == 60 * PIECE  # nothing lost or repeated
    assert worst_gap <= 0.1 * rtf + 1e-9  # at most the wait for the provider's next piece
    assert all(s % 2 == 0 for s in sizes)


def test_a_fast_provider_gets_few_large_chunks() -> None:
    sizes, _ = play(Clock(), seconds=6.0, rtf=0.25)
    assert len(sizes) <= 10  # 6 s of audio in 100 ms pieces: 60 pieces
    assert max(sizes) <= MAX_CHUNK_BYTES + PIECE
    assert sizes[-2] > sizes[1]  # chunks grow


def test_a_slow_provider_gets_its_audio_out_piece_by_piece() -> None:
    sizes, _ = play(Clock(), seconds=3.0, rtf=1.0)
    assert len(sizes) >= 25  # every 100 ms piece goes out as it comes


def test_the_first_chunk_goes_out_as_soon_as_it_is_there() -> None:
    clock = Clock()
    first = next(rechunk(iter([b"\x00" * FIRST_CHUNK_BYTES, b"\x00" * 10]), clock=clock))
    assert len(first) == FIRST_CHUNK_BYTES


def test_odd_bytes_wait_for_their_sample() -> None:
    out = list(rechunk(iter([b"\x00" * 641, b"\x01", b"\x00" * 3]), clock=Clock()))
    assert out[0] == b"\x00" * 640
    assert all(len(c) % 2 == 0 for c in out)
    assert b"".join(out) == b"\x00" * 641 + b"\x01" + b"\x00" * 2  # a lone last byte is no sample


@pytest.mark.parametrize("rtf", [0.25, 0.5, 1.0])
def test_a_later_sentence_heard_after_audio_in_hand_starts_with_a_large_chunk(rtf: float) -> None:
    alone, _ = play(Clock(), seconds=4.0, rtf=rtf)
    sizes, worst_gap = play(Clock(), seconds=4.0, rtf=rtf, busy_s=2.0)
    assert sum(sizes) == 40 * PIECE
    assert worst_gap <= 0.1 * rtf + 1e-9  # never more than the wait for a piece
    if rtf < 1.0:  # a provider faster than real time: fewer, larger chunks
        assert sizes[0] >= RATE * 2 * 1.0 - PIECE  # about half the 2 s in hand
        assert len(sizes) < len(alone)


def test_less_in_hand_than_the_low_water_counts_as_none() -> None:
    sizes, _ = play(Clock(), seconds=2.0, rtf=0.25, busy_s=0.05)
    assert sizes == play(Clock(), seconds=2.0, rtf=0.25)[0]  # the first piece out at once


class Stream:
    """A network stream: 100 ms pieces arriving ``rtf`` × 0.1 s apart after ``ttfb``, whether
    read or not. A read finding nothing there blocks until the next piece: a wake-up."""

    def __init__(self, clock: Clock, seconds: float, rtf: float, ttfb: float = 0.1) -> None:
        self.clock = clock
        self.arrivals = [clock.now + ttfb + i * 0.1 * rtf for i in range(int(seconds * 10))]
        self.wakeups = 0

    def __iter__(self) -> Iterator[bytes]:
        for at in self.arrivals:
            if at > self.clock.now:
                self.wakeups += 1
                self.clock.now = at
            yield b"\x01\x00" * (PIECE // 2)


def read(seconds: float, rtf: float, pause: bool) -> tuple[Stream, list[int], float, float]:
    """Stream, chunk sizes, worst silence at the listener, and when the end was seen."""
    clock = Clock()
    stream = Stream(clock, seconds, rtf)

    def sleep(s: float) -> None:
        clock.now += s
        stream.wakeups += 1  # the end of a pause wakes the reader too

    sizes: list[int] = []
    playing_until: float | None = None
    worst_gap = 0.0
    for chunk in rechunk(stream, clock=clock, rate=RATE, sleep=sleep if pause else None):
        sizes.append(len(chunk))
        if playing_until is None:
            playing_until = clock.now
        worst_gap = max(worst_gap, clock.now - playing_until)
        playing_until = max(playing_until, clock.now) + len(chunk) / 2 / RATE
    return stream, sizes, worst_gap, clock.now


@pytest.mark.parametrize("rtf", [0.25, 0.5, 0.9, 1.0])
def test_a_network_stream_is_read_in_fewer_wakeups_without_a_gap(rtf: float) -> None:
    each, each_sizes, _, each_end = read(6.0, rtf, pause=False)
    batched, sizes, worst_gap, end = read(6.0, rtf, pause=True)
    assert sum(sizes) == sum(each_sizes) == 60 * PIECE
    assert worst_gap <= 0.1 * rtf + 1e-9  # never more than the wait for a piece
    assert end - each_end <= READ_PAUSE_S + 1e-9  # the stream's end seen a little later
    assert each.wakeups == 60
    # Never more wake-ups than reading each piece as it comes (a pause too short to gather
    # two pieces is not taken: a voice barely faster than real time is read piece by piece).
    assert batched.wakeups <= each.wakeups, (batched.wakeups, each.wakeups)
    if rtf < 0.9:  # pieces come much faster than they play: several are read per wake-up
        assert batched.wakeups <= 0.55 * each.wakeups, (batched.wakeups, each.wakeups)


def test_what_piled_up_is_read_without_then_waiting_for_the_next_piece() -> None:
    # The voice's pace is known from the reads that waited: once a pause's pile is read, the
    # reader pauses again at once, not after a read that waits for the next piece (26 wake-ups
    # for 6 s of audio at a quarter of real time, when every pause followed such a read).
    batched, *_ = read(6.0, 0.25, pause=True)
    assert batched.wakeups <= 18, batched.wakeups
