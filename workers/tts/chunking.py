"""Re-chunking synthesized audio for the turn stream: small at first, then ever larger.

Every chunk is a Redis write, a stream entry and a read at each listener, so fewer chunks mean
less CPU per turn. But the listener must never run dry: the first chunk goes out at once, each
later chunk may be twice as large as the one before (up to ``max_bytes``), and whatever has
arrived goes out early when the listener has less than ``low_water_s`` of audio left to play
(a provider that is barely faster than real time gets small chunks; a fast one gets large ones).

A later sentence of a reply is heard after the ones before it: when the listener still has
their audio to play (``busy_until``), its first chunk need not be small. It may hold half that
time's worth of audio, and the low-water rule holds from its first byte.

A streaming provider sends a piece every few tens of milliseconds, and each piece read on its
own wakes the reading thread. When the audio arrives by itself (a network stream, ``sleep``
given), the reader pauses up to ``READ_PAUSE_S`` (``workers/runtime/batching.py``) while the
listener has enough in hand, and reads what piled up meanwhile at once: fewer wake-ups, the
same audio, the stream's end seen at most that much later. It pauses after a read that had to
wait for its piece, or as soon as the pile is read (the voice's pace, measured at those reads,
says when), and never for less than two pieces' interval, which would save no wake-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from voxqueue.audio import SAMPLE_RATE
from workers.runtime.batching import BLOCKED_READ_S, Arrival

FIRST_CHUNK_BYTES = 640  # 20 ms of 16 kHz 16-bit audio
NEXT_CHUNK_BYTES = 8000  # 250 ms, doubled after every chunk
MAX_CHUNK_BYTES = 64000  # 2 s
LOW_WATER_S = 0.15


def rechunk(chunks: Iterable[bytes], *, first: int = FIRST_CHUNK_BYTES,
            size: int = NEXT_CHUNK_BYTES, max_bytes: int = MAX_CHUNK_BYTES,
            low_water_s: float = LOW_WATER_S, rate: int = SAMPLE_RATE,
            clock: Callable[[], float] = time.monotonic,
            busy_until: float | None = None,
            sleep: Callable[[float], None] | None = None) -> Iterator[bytes]:
    """Whole 16-bit samples: ``first`` bytes or more, then growing chunks (see module doc).
    ``busy_until``: when (``clock``) the listener will have played the audio before this;
    ``sleep``: wait before reads (for audio that arrives by itself)."""
    carry = b""
    want = first
    #: When the listener will have played everything sent (None: nothing to play yet).
    played_by: float | None = None
    if busy_until is not None and (ahead := busy_until - clock()) > low_water_s:
        played_by = busy_until
        want = min(max_bytes, max(size, int(ahead / 2 * rate) * 2))
    source = iter(chunks)
    blocked = True  # whether the last read waited for its piece (one that did not was there)
    arrival = Arrival()
    while True:
        # After a read that waited, or once what had piled up is read: pause for half the time
        # the listener can wait, so that pieces pile up meanwhile.
        if (sleep is not None and played_by is not None and (pause := arrival.pause(
                blocked, now := clock(), (played_by - now - low_water_s) / 2))):
            sleep(pause)
        asked = clock()
        chunk = next(source, None)
        if chunk is None:
            break
        now = clock()
        blocked = now - asked >= BLOCKED_READ_S
        arrival.read(len(chunk), now, blocked)
        carry += chunk
        whole = len(carry) - len(carry) % 2
        if not whole:
            continue
        now = clock()
        running_dry = played_by is not None and played_by - now < low_water_s
        if whole >= want or running_dry:
            yield carry[:whole]
            carry = carry[whole:]
            want = size if want < size else min(max_bytes, want * 2)
            played_by = max(played_by or now, now) + whole / 2 / rate
    whole = len(carry) - len(carry) % 2
    if whole:
        yield carry[:whole]

