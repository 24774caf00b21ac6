"""Text for the ear (voxqueue/spoken): markdown to sentences as it streams, and written forms
an engine would misread written out."""

from __future__ import annotations

import random

import pytest

from voxqueue.spoken import MarkdownFilter, Reading, for_speech, plain, words
from voxqueue.spoken.sentences import SentenceSplitter, split_sentences

ISSUE_REPLY = ("**Sure!** Here is how: 1. Open the [garden app](https://example.com/garden?id=42)."
               " 2. Press `start` 🚀. ## Tip - Water *before* 9am 🌱.")
LINES_REPLY = ("**Sure!** Here is how:\n\n1. Open the [garden app](https://example.com/garden?id=42)"
               ".\n2. Press `start` 🚀\n\n## Tip\n- water *before* 9am 🌱\n\nSee "
               "https://www.example.org/x?y=1, or <http://foo.io>.\n```python\nprint(1)\n```\n"
               "| City | Temp |\n|---|---|\n| Paris | 21 |\n---\n> Quoted _words_ here\nDone")


def test_the_issue_reply_loses_its_markup():
    assert plain(ISSUE_REPLY) == ("Sure! Here is how: Open the garden app. Press start. "
                                  "Tip - Water before 9am.")


def test_lines_become_sentences_and_blocks_their_words():
    assert plain(LINES_REPLY) == (
        "Sure! Here is how. Open the garden app. Press start. Tip. Water before 9am. "
        "See example dot org, or foo dot io. City, Temp. Paris, 21. Quoted words here. Done")


@pytest.mark.parametrize("reply", [ISSUE_REPLY, LINES_REPLY])
def test_streamed_in_any_pieces_it_says_the_same(reply):
    rng = random.Random(7)
    for _ in range(300):
        md, out, i = MarkdownFilter(), [], 0
        while i < len(reply):
            n = rng.randint(1, 7)
            out.append(md.feed(reply[i:i + n]))
            i += n
        out.append(md.flush())
        assert " ".join("".join(out).split()) == plain(reply)


def test_bullet_characters_are_list_markers_too():
    assert plain("Options:\n• tea\n• coffee\n") == "Options. Tea. Coffee."


def test_a_phrase_is_not_made_a_sentence():
    # The TTS worker filters the pieces the agent cut: "It is nine in the evening" | "in Tokyo."
    assert plain("It is nine in the evening") == "It is nine in the evening"
    assert plain("- first\n- second") == "First. Second"


def test_nothing_is_held_back_that_cannot_change():
    md = MarkdownFilter()
    assert md.feed("Tomorrow will be sunny in") == "Tomorrow will be sunny in"
    assert md.feed(" Lisbon,") == " Lisbon"  # the comma waits: the line may end there
    assert md.feed(" see [the") == ", see"  # an open link waits for its end
    assert md.feed(" map](https://x.io/m) ht") == " the map"  # "ht" may start a URL
    assert md.feed("tp://x.io today") == " x dot io today"


def test_a_pause_releases_a_word_held_as_a_possible_marker_not_an_open_link():
    md = MarkdownFilter()
    assert md.feed("Twelve times thirteen is 156.") == "Twelve times thirteen is"
    assert md.holding()
    assert md.release() == " 156." and not md.holding()
    assert md.feed(" See [the") == " See"
    assert md.release() == "" and md.holding()  # an open link is unfinished, pause or not
    assert md.feed(" map](https://x.io/m).") + md.flush() == " the map."


def test_list_items_are_cut_as_sentences_of_their_own():
    splitter = SentenceSplitter(first_phrase_words=0)
    md = MarkdownFilter()
    text = "Steps:\n- preheat the oven\n- mix the flour\n- bake it for an hour\n"
    pieces = splitter.feed(md.feed(text)) + splitter.feed(md.flush()) + splitter.flush()
    assert pieces == ["Steps. Preheat the oven.", "Mix the flour.", "Bake it for an hour."]
    # (Without the filter the list markers are in the sentences, and items run together.)
    assert split_sentences(text)[0] == "Steps:\n- preheat the oven\n- mix the flour\n- bake it"


@pytest.mark.parametrize(("written", "digits", "in_words"), [
    ("Timer set for 10 minutes (id ad90ec79).", "Timer set for 10 minutes.",
     "Timer set for ten minutes."),
    ("It's 10:35 AM on Tuesday, December 1, 2026 (Asia/Tokyo time, UTC+0900).",
     "It's 10:35 AM on Tuesday, December 1, 2026 (Tokyo time, UTC plus 9).",
     "It's ten thirty five A M on Tuesday, December first, twenty twenty six (Tokyo time, UTC "
     "plus nine)."),
    ("Meet on 2026-12-25 at 14:30.", "Meet on December 25, 2026 at 14:30.",
     "Meet on December twenty fifth, twenty twenty six at fourteen thirty."),
    ("It costs $4.50, or €12.", "It costs $4.50, or €12.",
     "It costs four dollars and fifty cents, or twelve euros."),
    ("A $1.5 million house.", "A $1.5 million house.", "A one point five million dollars house."),
    ("21°C, 70°F, 75% humid.", "21 degrees Celsius, 70 degrees Fahrenheit, 75 percent humid.",
     "twenty one degrees Celsius, seventy degrees Fahrenheit, seventy five percent humid."),
    ("Drive at 50 km/h for 1 km.", "Drive at 50 kilometers per hour for 1 kilometer.",
     "Drive at fifty kilometers per hour for one kilometer."),
    ("Dr. Smith, e.g. on Main St. at 9am.", "Doctor Smith, for example on Main Street at 9am.",
     "Doctor Smith, for example on Main Street at nine A M."),
    ("Order #42: 3 x 4 = 12, ~2 km.", "Order number 42: 3 times 4 equals 12, about 2 kilometers.",
     "Order number forty two: three times four equals twelve, about two kilometers."),
    ("It's 6:05 PM, the 3rd time.", "It's 6:05 PM, the 3rd time.",
     "It's six oh five P M, the third time."),
    ("job 0f8e2c1a-1d2b-4c3d-9e8f-123456789abc failed", "job failed", "job failed"),
])
def test_what_an_engine_would_misread_is_written_out(written, digits, in_words):
    assert words(written, Reading.DIGITS) == digits
    assert words(written, Reading.WORDS) == in_words


def test_plain_words_and_times_without_digits_are_left_alone():
    text = "The decade ahead looks bright, and I'd add more coffee."
    assert for_speech(text) == text
    assert for_speech("🚀🌱") == ""
