"""A turn's progress as the Wyoming events a satellite expects, read in a thread.

``transcript`` as soon as speech to text ends (the satellite stops streaming then),
``synthesize`` with the reply's text, and the reply's audio as ``audio-start``,
``audio-chunk``… ``audio-stop`` in speaking order as it arrives; ``error`` when the turn fails.
"""

from __future__ import annotations

from collections.abc import Iterator

from wyoming.asr import Transcript
from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import Synthesize

from voxqueue.client.direct import Turn
from voxqueue.client.result import in_speaking_order
from voxqueue.turns import StreamEntry
from voxqueue.wyoming import audio_out


def answer_events(turn: Turn, *, spoken: bool = True) -> Iterator[Event]:
    """The Wyoming events of one turn, ending when it ends. ``spoken``: the turn began with
    speech, so a ``transcript`` comes first."""
    if spoken:
        text = ""  # no transcript (the turn failed first): an empty one ends the listening
        for entry in turn.events():
            if entry.event.type == "stt-end":
                text = str(entry.event.data.get("text", ""))
                break
            if entry.event.type == "run-end":
                break
        yield Transcript(text=text).event()
    marks: list[Event] = []

    def watched() -> Iterator[StreamEntry]:
        for entry in turn.events():
            data = entry.event.data
            if entry.event.type == "reply" and data.get("text"):
                marks.append(Synthesize(text=str(data["text"])).event())
            elif entry.event.type == "error":
                marks.append(Error(text=str(data.get("message", "")),
                                   code=str(data.get("code", "error"))).event())
            yield entry

    sent = None  # bytes of reply audio sent; None before its audio-start
    for pcm in in_speaking_order(watched()):
        yield from marks
        marks.clear()
        if sent is None:
            sent = 0
            yield audio_out.start()
        yield from audio_out.chunks(pcm, sent)
        sent += len(pcm)
    yield from marks
    if sent is not None:
        yield audio_out.stop(sent)
