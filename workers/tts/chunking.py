"""Re-chunking synthesized audio for the turn stream: small at first, then ever larger.

Every chunk is a Redis write, a stream entry and a read at each listener, so fewer chunks mean
less CPU per turn. But the listener must never run dry: the first chunk goes out at once, each
later chunk may be twice as large as the one before (up to ``max_bytes``), and whatever has
arrived goes out early when the listener has less than ``low_water_s`` of audio left to play
(a provider that is barely faster than real time gets small chunks; a fast one gets large ones).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from voxqueue.audio import SAMPLE_RATE

FIRST_CHUNK_BYTES = 640  # 20 ms of 16 kHz 16-bit audio
NEXT_CHUNK_BYTES = 8000  # 250 ms, doubled after every chunk
MAX_CHUNK_BYTES = 64000  # 2 s
LOW_WATER_S = 0.15


def rechunk(chunks: Iterable[bytes], *, first: int = FIRST_CHUNK_BYTES,
            size: int = NEXT_CHUNK_BYTES, max_bytes: int = MAX_CHUNK_BYTES,
            low_water_s: float = LOW_WATER_S, rate: int = SAMPLE_RATE,
            clock: Callable[[], float] = time.monotonic) -> Iterator[bytes]:
    """Whole 16-bit samples: ``first`` bytes or more, then growing chunks (see module doc)."""
    carry = b""
    want = first
    started: float | None = None  # when the first chunk went out (playback starts about then)
    sent_s = 0.0  # seconds of audio sent so far
    for chunk in chunks:
        carry += chunk
        whole = len(carry) - len(carry) % 2
        if not whole:
            continue
        running_dry = started is not None and started + sent_s - clock() < low_water_s
        if whole >= want or running_dry:
            yield carry[:whole]
            carry = carry[whole:]
            if started is None:
                started = clock()
                want = size
            else:
                want = min(max_bytes, want * 2)
            sent_s += whole / 2 / rate
    whole = len(carry) - len(carry) % 2
    if whole:
        yield carry[:whole]
