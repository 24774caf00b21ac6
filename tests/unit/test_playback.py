"""What a listener hears of a turn's audio events (``voxqueue.client.result``): sentences in order,
and a sentence synthesized again heard as one whole rendition, never spliced."""

from __future__ import annotations

from voxqueue.client.result import in_speaking_order
from voxqueue.contracts import TurnEvent
from voxqueue.turns import StreamEntry


def chunk(seq: int, attempt: int, offset: int, pcm: bytes) -> StreamEntry:
    return StreamEntry("0-0", TurnEvent(type="tts-chunk", turn_id="t", data={
        "seq": seq, "idx": 0, "attempt": attempt, "offset": offset, "bytes": len(pcm)}), pcm)


def event(type_: str, **data: object) -> StreamEntry:
    return StreamEntry("0-0", TurnEvent(type=type_, turn_id="t", data=dict(data)))  # type: ignore[arg-type]


def heard(entries: list[StreamEntry]) -> list[bytes]:
    return list(in_speaking_order(entries))


def test_a_sentence_said_differently_the_second_time_restarts_from_its_start():
    """The listener heard "AAAA" of the first rendition when its worker died; the second says
    the sentence otherwise: it is heard whole from its start, not from byte 4 on."""
    entries = [chunk(0, 1, 0, b"AAAA"), chunk(0, 2, 0, b"bbbb"), chunk(0, 2, 4, b"cccc"),
               event("tts-end", seq=0), event("run-end", status="ok")]
    assert b"".join(heard(entries)) == b"AAAA" + b"bbbbcccc"


def test_a_voice_that_repeats_itself_goes_on_where_the_listener_was():
    entries = [chunk(0, 1, 0, b"AAAA"), chunk(0, 2, 0, b"AA"), chunk(0, 2, 2, b"AAcccc"),
               event("tts-end", seq=0)]
    assert b"".join(heard(entries)) == b"AAAAcccc"


def test_a_difference_found_late_still_restarts_the_sentence():
    entries = [chunk(0, 1, 0, b"AAAA"), chunk(0, 2, 0, b"AA"), chunk(0, 2, 2, b"Xccccc"),
               event("tts-end", seq=0)]
    assert b"".join(heard(entries)) == b"AAAA" + b"AAXccccc"


def test_a_later_sentence_interrupted_before_its_turn_is_heard_once():
    """Sentence 1's first rendition waited behind sentence 0: none of it was heard, so only
    the second rendition is."""
    entries = [chunk(0, 1, 0, b"zero"), chunk(1, 1, 0, b"ONE-"), chunk(1, 2, 0, b"one!"),
               event("tts-end", seq=1), event("tts-end", seq=0)]
    assert b"".join(heard(entries)) == b"zero" + b"one!"


def test_a_superseded_attempt_s_late_chunks_are_never_heard():
    entries = [chunk(0, 2, 0, b"new-"), chunk(0, 1, 0, b"OLD-"), chunk(0, 2, 4, b"tail"),
               chunk(0, 1, 4, b"TAIL"), event("tts-end", seq=0)]
    assert b"".join(heard(entries)) == b"new-tail"


def test_a_turn_ending_while_the_new_rendition_matches_repeats_nothing():
    entries = [chunk(0, 1, 0, b"AAAA"), chunk(0, 2, 0, b"AA"), event("run-end", status="ok")]
    assert b"".join(heard(entries)) == b"AAAA"
