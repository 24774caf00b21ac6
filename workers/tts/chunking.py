"""Re-chunking synthesized audio for the turn stream: the first chunk at once, then larger ones.

A small first chunk starts playback as early as possible; later chunks of about a quarter of a
second keep the number of stream entries (and Redis writes) low.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

FIRST_CHUNK_BYTES = 640  # 20 ms of 16 kHz 16-bit audio
CHUNK_BYTES = 8000  # 250 ms


def rechunk(chunks: Iterable[bytes], first: int = FIRST_CHUNK_BYTES,
            size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Whole 16-bit samples, ``first`` bytes or more at first, then ``size`` bytes or more."""
    carry = b""
    want = first
    for chunk in chunks:
        carry += chunk
        whole = len(carry) - len(carry) % 2
        if whole >= want:
            yield carry[:whole]
            carry = carry[whole:]
            want = size
    whole = len(carry) - len(carry) % 2
    if whole:
        yield carry[:whole]
