"""Message builders, the sentence splitter and result assembly."""

from __future__ import annotations

import pytest

from voxqueue.client.result import assemble
from voxqueue.contracts import ToolOutcome, TurnEvent, TurnSpec
from voxqueue.observability.timeline import spans
from voxqueue.spoken.sentences import SentenceSplitter, split_sentences
from voxqueue.turns import StreamEntry
from workers.agent import messages as msg


def test_builders_make_openai_shaped_messages():
    assert msg.system("s") == {"role": "system", "content": "s"}
    assert msg.user("u") == {"role": "user", "content": "u"}
    call = msg.assistant_tool_calls([{"id": "c1", "name": "f", "arguments": "{}"}])
    assert call["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert call["content"] is None
    assert msg.tool_result("c1", "ok") == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert msg.tool_error("c1", "bad")["content"] == "Error: bad"
    failed = ToolOutcome(call_id="c2", name="f", arguments={}, ok=False, content="Error: x",
                         started_at=0, ms=1)
    assert msg.from_outcome(failed) == {"role": "tool", "tool_call_id": "c2",
                                        "content": "Error: x"}


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello there. How are you today?", ["Hello there.", "How are you today?"]),
    ("It is 3.5 degrees. Take a coat!", ["It is 3.5 degrees.", "Take a coat!"]),
    ("Ask Dr. Smith about it. He knows.", ["Ask Dr. Smith about it.", "He knows."]),
    ("No punctuation at all", ["No punctuation at all"]),
    ("", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_the_first_phrase_may_end_at_a_clause_to_start_speaking_sooner():
    s = SentenceSplitter()
    assert s.feed("Sure, here it is") == []  # too short to be worth a cut
    assert s.feed(": tomorrow in Lisbon, it will be ") == ["Sure, here it is: tomorrow in Lisbon,"]
    assert s.feed("sunny, warm, and dry. Take a hat, ") == ["it will be sunny, warm, and dry."]
    assert s.flush() == ["Take a hat,"]  # later pieces are whole sentences


def test_the_first_phrase_may_end_before_a_phrase_opening_word():
    s = SentenceSplitter()
    assert s.feed("Tomorrow will be") == []
    assert s.feed(" sunny in") == ["Tomorrow will be sunny"]  # as soon as the opener arrives
    assert s.feed(" Lisbon with a high") == []
    assert s.feed(" of twenty four degrees. In the evening it cools") == [
        "in Lisbon with a high of twenty four degrees."]
    assert s.flush() == ["In the evening it cools"]  # only the first piece is cut early


def test_a_token_that_lengthens_an_opener_still_follows_a_word_boundary():
    s = SentenceSplitter()
    assert s.feed("I will check the weather for") == ["I will check the weather"]
    assert s.feed("ecast now.") + s.flush() == ["forecast now."]


@pytest.mark.parametrize(("text", "expected"), [
    ("It is sunny in Paris today.", ["It is sunny in Paris today."]),  # 3 words before "in"
    ("Sure, I can do it for you", ["Sure, I can do it", "for you"]),
    ("I will check the forecast.", ["I will check the forecast."]),  # "for" within a word
])
def test_a_phrase_cut_needs_enough_words_first(text, expected):
    s = SentenceSplitter()
    assert s.feed(text) + s.flush() == expected


def test_phrase_cuts_can_be_turned_off():
    s = SentenceSplitter(first_phrase_words=0)
    assert s.feed("Tomorrow will be sunny in Lisbon with") == []


def test_splitter_yields_sentences_as_text_streams():
    s = SentenceSplitter()
    assert s.feed("The weather in Paris is ") == []
    assert s.feed("sunny. Tomorrow it ") == ["The weather in Paris is sunny."]
    assert s.feed("will rain") == []
    # Whole as its full stop arrives: the model may pause here (a tool call, thinking).
    assert s.feed(".") == ["Tomorrow it will rain."]
    assert s.flush() == []


@pytest.mark.parametrize("last_word", ["west", "first", "items", "piano", "forecast", "Ms"])
def test_a_word_that_ends_like_an_abbreviation_ends_its_sentence(last_word):
    s = SentenceSplitter()
    said = s.feed(f"Walk two miles to the {last_word}. Then turn left at the bridge.")
    expected = ([f"Walk two miles to the {last_word}.", "Then turn left at the bridge."]
                if last_word != "Ms" else [f"Walk two miles to the {last_word}. Then turn left "
                                           "at the bridge."])
    assert said + s.flush() == expected


@pytest.mark.parametrize(("pieces", "at_mark", "expected"), [
    (["It is three degrees", "!", " Take a coat."], ["It is three degrees!"],
     ["It is three degrees!", "Take a coat."]),
    (["Is it three degrees", "?", "!", " Yes."], ["Is it three degrees?"],
     ["Is it three degrees?", "Yes."]),
    (['He said "take a coat', '."', '" Then he left.'], ['He said "take a coat."'],
     ['He said "take a coat."', "Then he left."]),
    (["It is 3", ".", "5 degrees today."], [], ["It is 3.5 degrees today."]),
    (["Ask the doctor, Dr", ".", " Smith, about it."], [],
     ["Ask the doctor, Dr. Smith, about it."]),
    (["Made in the U.S", ".", "A. today."], [], ["Made in the U.S.A. today."]),
    (["Call John F", ".", " Kennedy airport."], [], ["Call John F. Kennedy airport."]),
])
def test_a_sentence_ends_when_its_mark_arrives_unless_the_next_character_decides(
        pieces, at_mark, expected):
    s = SentenceSplitter(first_phrase_words=0)
    said = s.feed(pieces[0]) + s.feed(pieces[1])
    assert said == at_mark  # what is cut before any character after the mark has arrived
    for piece in pieces[2:]:
        said += s.feed(piece)
    assert said + s.flush() == expected


@pytest.mark.parametrize("held", ["Twelve times thirteen is 156.", "Ask for it at Dr.",
                                  "It was made in the U.S.", "Call John F.", "Sure.",
                                  "All done here."])
def test_a_pause_after_a_held_mark_ends_the_sentence(held):
    s = SentenceSplitter(first_phrase_words=0)
    cut = s.feed(held)
    if cut:  # a word that is no abbreviation: cut at its mark, nothing held for a pause
        assert cut == [held] and not s.held_end() and s.end_at_pause() == []
        return
    assert s.held_end()
    assert s.end_at_pause() == [held]
    assert not s.held_end() and s.end_at_pause() == []
    # what comes after the pause is the next sentence, without the mark's leftovers
    assert s.feed('." Then more.') + s.flush() == ["Then more."]


@pytest.mark.parametrize("text", ["It is 3", "", "No mark at all here", "Well, 3.5"])
def test_no_pause_ends_what_does_not_stop_at_a_mark(text):
    s = SentenceSplitter(first_phrase_words=0)
    assert s.feed(text) == [] and not s.held_end() and s.end_at_pause() == []


def test_assemble_orders_audio_by_sequence_and_keeps_the_last_attempt():
    spec = TurnSpec(turn_id="turn-0001", session_id="s", input="text", text="hi",
                    created_at=100.0, deadline=160.0)

    def entry(type_, ts, pcm=None, **data):
        return StreamEntry(id="0", event=TurnEvent(type=type_, turn_id="turn-0001", ts=ts,
                                                   data=data), pcm=pcm)

    entries = [
        entry("run-start", 100.0),
        entry("llm-end", 100.5, ms=400.0),
        entry("reply", 100.6, text="One. Two."),
        # Written with the first audio; the synthesis began at started_at.
        entry("tts-start", 100.8, seq=1, started_at=100.7, queue_ms=50.0),
        entry("tts-chunk", 100.8, b"B1", seq=1, idx=0, attempt=1),
        entry("tts-chunk", 100.9, b"A1", seq=0, idx=0, attempt=1),
        entry("tts-end", 100.95, seq=1),
        entry("tts-chunk", 101.0, b"a2", seq=0, idx=0, attempt=2),   # redelivered sentence 0
        entry("tts-chunk", 101.1, b"b2", seq=0, idx=1, attempt=2),
        entry("tts-end", 101.2, seq=0),
        entry("run-end", 101.5, status="ok"),
    ]
    result, pcm = assemble(spec, entries)
    assert pcm == b"a2b2B1"
    assert result.status == "ok" and result.reply == "One. Two." and result.transcript == "hi"
    assert result.timings["total"] == pytest.approx(1500.0)
    assert result.timings["first_audio"] == pytest.approx(800.0)
    assert result.timings["llm"] == 400.0
    assert result.timings["tts"] == pytest.approx(500.0)  # 100.7 -> 101.2
    assert list(result.timings) == ["llm", "tts", "first_audio", "total"]
    drawn = {s.label: s for s in spans(spec, entries)}
    assert drawn["tts sentence 1"].start_ms == pytest.approx(700.0)
    assert drawn["queue → tts"].end_ms == pytest.approx(700.0)
    assert drawn["queue → tts"].ms == pytest.approx(50.0)


def test_assemble_lists_tool_calls_in_the_order_the_model_asked_for_them():
    # Calls of one answer run at once and end in any order; the result keeps the model's.
    spec = TurnSpec(turn_id="turn-0002", session_id="s", input="text", text="hi",
                    created_at=100.0, deadline=160.0)

    def entry(type_, ts, **data):
        return StreamEntry(id="0", event=TurnEvent(type=type_, turn_id="turn-0002", ts=ts,
                                                   data=data))

    asked = [{"id": "c1", "name": "calculate", "arguments": "{}"},
             {"id": "c2", "name": "whoami", "arguments": "{}"}]
    entries = [
        entry("llm-end", 100.5, ms=400.0, tool_calls=asked),
        entry("tool-end", 100.6, call_id="c2", name="whoami", ok=True, result="me", ms=1.0),
        entry("tool-end", 100.7, call_id="c1", name="calculate", ok=True, result="42", ms=2.0),
        entry("llm-end", 101.0, ms=300.0, tool_calls=[{"id": "c3", "name": "again",
                                                          "arguments": "{}"}]),
        entry("tool-end", 101.1, call_id="c3", name="again", ok=True, result="ok", ms=1.0),
        entry("run-end", 101.5, status="ok"),
    ]
    result, _ = assemble(spec, entries)
    assert [c.name for c in result.tool_calls] == ["calculate", "whoami", "again"]
