"""A reply's audio in speaking order, from a turn's events: sentences synthesized in parallel
play one after another, and a sentence synthesized again plays on from where it was."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from voxqueue.turns import StreamEntry


def in_speaking_order(entries: Iterable[StreamEntry]) -> Iterator[bytes]:
    """The PCM of the ``tts-chunk`` entries, each chunk as soon as it can be played.

    Sentences may finish out of order: a later sentence's chunks wait until every earlier
    sentence has ended (``tts-end``, or the turn's ``run-end``). When a sentence is synthesized
    again (its task was redelivered), playback goes on from the byte offset already played, so
    nothing is heard twice and nothing is skipped.
    """
    next_seq = 0
    played: dict[int, int] = {}  # seq -> bytes played
    pending: dict[int, list[tuple[int, bytes]]] = {}  # seq -> (offset, pcm), in arrival order
    ended: set[int] = set()
    sent: dict[tuple[int, int], int] = {}  # (seq, attempt) -> bytes seen (old workers)

    def drain() -> Iterator[bytes]:
        nonlocal next_seq
        while True:
            for offset, pcm in pending.pop(next_seq, []):
                done = played.get(next_seq, 0)
                if offset + len(pcm) > done:
                    played[next_seq] = offset + len(pcm)
                    yield pcm[max(0, done - offset):]
            if next_seq not in ended:
                return
            next_seq += 1

    for entry in entries:
        ev, data = entry.event, entry.event.data
        if ev.type == "tts-chunk" and entry.pcm is not None:
            seq, attempt = int(data.get("seq", 0)), int(data.get("attempt", 1))
            offset = data.get("offset")
            if offset is None:
                offset = sent.get((seq, attempt), 0)
            sent[(seq, attempt)] = int(offset) + len(entry.pcm)
            pending.setdefault(seq, []).append((int(offset), entry.pcm))
        elif ev.type == "tts-end":
            ended.add(int(data.get("seq", 0)))
        elif ev.type == "run-end":
            ended.update(pending)
            ended.update(range(next_seq, max([next_seq, *pending]) + 1))
        else:
            continue
        yield from drain()
