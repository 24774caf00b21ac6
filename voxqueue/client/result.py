"""A turn's outcome from its events: the finished result and its reply audio (:func:`assemble`),
and the reply's audio in speaking order (:func:`in_speaking_order`): sentences synthesized in
parallel play one after another, and a sentence synthesized again is heard whole, never spliced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from voxqueue.contracts import ToolCallRecord, TurnResult, TurnSpec
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


_STATUSES = {"ok", "error", "cancelled", "timeout"}

#: Where each timing goes in a table: stages in turn order, then first audio, then the total.
_ORDER = {name: i for i, name in enumerate(("stt", "llm", "tools", "tts", "first_audio",
                                             "total"))}


def assemble(spec: TurnSpec, entries: Iterable[StreamEntry]) -> tuple[TurnResult, bytes]:
    """The turn's result and its reply PCM (sentences in order, last attempt of each)."""
    transcript = spec.text if spec.input == "text" else None
    reply: str | None = None
    tools: dict[str, ToolCallRecord] = {}
    asked: dict[str, int] = {}  # each tool call's place in the model's answers
    timings: dict[str, float] = {}
    status = "error"
    error: dict[str, str] | None = None
    chunks: dict[int, dict[int, list[tuple[int, bytes]]]] = {}
    first_audio: float | None = None
    start: dict[str, float] = {}

    def add(name: str, ms: float) -> None:
        timings[name] = round(timings.get(name, 0.0) + ms, 1)

    for entry in entries:
        ev, d = entry.event, entry.event.data
        if ev.type == "stt-start":
            start["stt"] = ev.ts
        elif ev.type == "stt-end":
            transcript = d.get("text", "")
            add("stt", (ev.ts - start.get("stt", ev.ts)) * 1000)
        elif ev.type == "llm-end":
            add("llm", float(d.get("ms", 0.0)))
            for call in d.get("tool_calls") or []:
                asked.setdefault(str(call.get("id")), len(asked))
        elif ev.type == "tool-end":
            tools[str(d.get("call_id"))] = ToolCallRecord(
                name=str(d.get("name")),
                arguments=d.get("arguments", {}),
                result=d.get("result") if d.get("ok") else None,
                error=None if d.get("ok") else d.get("error"),
                ms=float(d.get("ms", 0.0)),
            )
        elif ev.type == "reply":
            # A spoken apology never hides the answer, when there was one.
            if not (d.get("apology") and reply is not None):
                reply = d.get("text")
        elif ev.type == "tts-start":  # written with the first audio; the work began earlier
            start.setdefault("tts", float(d.get("started_at") or ev.ts))
        elif ev.type == "tts-chunk" and entry.pcm is not None:
            first_audio = ev.ts if first_audio is None else first_audio
            by_attempt = chunks.setdefault(int(d.get("seq", 0)), {})
            by_attempt.setdefault(int(d.get("attempt", 1)), []).append(
                (int(d.get("idx", 0)), entry.pcm))
        elif ev.type == "tts-end":
            start["tts-end"] = ev.ts
        elif ev.type == "error" and error is None:
            error = {"code": str(d.get("code")), "message": str(d.get("message"))}
        elif ev.type == "run-end":
            status = str(d.get("status", "error"))
            timings["total"] = round((ev.ts - spec.created_at) * 1000, 1)
    if tools:
        timings["tools"] = round(sum(t.ms for t in tools.values()), 1)
    if "tts" in start and "tts-end" in start:
        timings["tts"] = round((start["tts-end"] - start["tts"]) * 1000, 1)
    if first_audio is not None:
        timings["first_audio"] = round((first_audio - spec.created_at) * 1000, 1)
    # In the order a turn goes through them, the whole turn last.
    timings = dict(sorted(timings.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))
    pcm = b"".join(
        data
        for seq in sorted(chunks)
        for _idx, data in sorted(chunks[seq][max(chunks[seq])])
    )
    result = TurnResult(
        turn_id=spec.turn_id,
        session_id=spec.session_id,
        transcript=transcript,
        reply=reply,
        # In the order the model asked for them (they run at once, and end in any order).
        tool_calls=[tools[c] for c in sorted(tools, key=lambda c: asked.get(c, len(asked)))],
        timings=timings,
        status=status if status in _STATUSES else "error",  # type: ignore[arg-type]
        error=error,
    )
    return result, pcm
