"""A turn's progress as the Wyoming events a satellite expects, read in a thread.

``transcript`` as soon as speech to text ends (the satellite stops streaming then),
``synthesize`` with the reply's text, and the reply's audio as ``audio-start``,
``audio-chunk``… ``audio-stop`` in speaking order as it arrives; ``error`` when the turn fails.
"""

from __future__ import annotations

from collections.abc import Iterator

from wyoming.asr import Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import Synthesize

from edge.frames import RATE
from voxqueue.client import Turn
from voxqueue.playback import in_speaking_order
from voxqueue.turns import StreamEntry

#: The largest ``audio-chunk`` sent: 0.1 s of speech.
CHUNK_BYTES = RATE * 2 // 10


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

    started = False
    for pcm in in_speaking_order(watched()):
        yield from marks
        marks.clear()
        if not started:
            started = True
            yield AudioStart(rate=RATE, width=2, channels=1).event()
        for at in range(0, len(pcm), CHUNK_BYTES):
            yield AudioChunk(rate=RATE, width=2, channels=1, audio=pcm[at:at + CHUNK_BYTES]).event()
    yield from marks
    if started:
        yield AudioStop().event()
