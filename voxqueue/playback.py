"""A reply's audio in speaking order, from a turn's events: sentences synthesized in parallel
play one after another, and a sentence synthesized again is heard whole, never spliced."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from voxqueue.turns import StreamEntry


@dataclass
class _Sentence:
    """One sentence's audio: the newest rendition's bytes (its task's newest attempt)."""

    attempt: int = 0
    audio: bytearray = field(default_factory=bytearray)
    played: int = 0
    """Bytes of ``audio`` handed to the listener."""
    heard: bytes = b""
    """What the listener heard of an older rendition, while the newer one is checked
    against it (empty otherwise)."""

    def take(self, attempt: int, offset: int | None, pcm: bytes) -> None:
        """Add a chunk; a newer attempt replaces the audio, an older one is dropped."""
        if attempt < self.attempt:
            return  # a superseded attempt's chunk (a zombie's): never heard
        if attempt > self.attempt:
            if self.played:
                self.heard = bytes(self.audio[:self.played])
            self.attempt, self.audio, self.played = attempt, bytearray(), 0
        have = len(self.audio)
        start = have if offset is None else offset
        if start + len(pcm) > have:
            self.audio += pcm[max(0, have - start):]

    def playable(self, ended: bool) -> bytes:
        """The audio the listener may hear now."""
        if self.heard:
            same = min(len(self.audio), len(self.heard))
            if self.audio[:same] != self.heard[:same]:
                self.heard = b""  # another rendition: heard again from its start
            elif len(self.audio) >= len(self.heard) or ended:
                self.played, self.heard = same, b""  # the same audio again: on from there
            else:
                return b""  # not known yet which
        new = bytes(self.audio[self.played:])
        self.played = len(self.audio)
        return new


def in_speaking_order(entries: Iterable[StreamEntry]) -> Iterator[bytes]:
    """The PCM of the ``tts-chunk`` entries, each chunk as soon as it can be played.

    Sentences may finish out of order: a later sentence's chunks wait until every earlier
    sentence has ended (``tts-end``, or the turn's ``run-end``). When a sentence is synthesized
    again (its task was redelivered: a newer ``attempt``), the older attempt's chunks not yet
    played are dropped, and so is any it writes later. If the listener heard the start of the
    older rendition, the newer one goes on from there only when it begins with exactly those
    bytes (a voice that repeats itself); otherwise it is heard from its start: the sentence
    restarts, and is never two renditions spliced at a byte offset (a voice with noise, or
    ElevenLabs, says a sentence differently each time).
    """
    next_seq = 0
    sentences: dict[int, _Sentence] = {}
    ended: set[int] = set()

    def drain() -> Iterator[bytes]:
        nonlocal next_seq
        while True:
            sentence = sentences.get(next_seq)
            if sentence is not None and (pcm := sentence.playable(next_seq in ended)):
                yield pcm
            if next_seq not in ended:
                return
            sentences.pop(next_seq, None)
            next_seq += 1

    for entry in entries:
        ev, data = entry.event, entry.event.data
        if ev.type == "tts-chunk" and entry.pcm is not None:
            seq, attempt = int(data.get("seq", 0)), int(data.get("attempt", 1))
            offset = data.get("offset")
            sentences.setdefault(seq, _Sentence()).take(
                attempt, None if offset is None else int(offset), entry.pcm)
        elif ev.type == "tts-end":
            ended.add(int(data.get("seq", 0)))
        elif ev.type == "run-end":
            ended.update(sentences)
            ended.update(range(next_seq, max([next_seq, *sentences]) + 1))
        else:
            continue
        yield from drain()
