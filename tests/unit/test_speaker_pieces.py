"""Later sentences of a reply go to TTS gathered into pieces while the listener has enough to
hear; a step run again sends the same pieces. The jobs are read back from Redis."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator

import pytest

from testkit.clock import wait_until
from tests.unit.test_speaker_filter import new_speaker, pieces_of, sent_jobs, speaker_runtime
from voxqueue.once import Fenced
from workers.agent import reply_sentences
from workers.agent.reply_sentences import Speaker
from workers.runtime import completion, handoff
from workers.runtime.resources import Runtime
from workers.runtime.stage import Stage

FIRST = "This opening sentence gives the listener a few seconds to hear. "  # 63 chars: ~3.2 s
LATER = ["Then a second sentence comes along. ", "A third one follows it closely. ",
         "And the fourth ends the reply. "]


@pytest.fixture
def rt(redis_server) -> Iterator[Runtime]:  # type: ignore[no-untyped-def]
    with speaker_runtime(redis_server, speech_filter=True) as runtime:
        yield runtime


def fake_clock(speaker: Speaker) -> list[float]:
    clock = [1000.0]
    speaker.clock = lambda: clock[0]  # type: ignore[method-assign]
    speaker.sleep = lambda s: None  # type: ignore[method-assign]
    return clock


def test_later_sentences_are_gathered_while_the_listener_has_enough(rt):
    speaker = new_speaker(rt)
    clock = fake_clock(speaker)
    speaker.on_text(FIRST)
    speaker.on_text(LATER[0])  # cuts the first sentence: sent at once
    assert [j.text for j in sent_jobs(rt)] == [FIRST.strip()]
    speaker.on_text(LATER[1])  # the second is whole, and the listener has ~3 s: gathered
    assert len(sent_jobs(rt)) == 1 and speaker._timer is not None
    clock[0] += 2.5  # ~0.7 s left in hand, under GATHER_WHILE_S: the next token sends them
    speaker.on_text(LATER[2][:-2])  # (not whole yet: its full stop comes with a later token)
    jobs = sent_jobs(rt)
    assert [j.text for j in jobs] == [FIRST.strip(), LATER[0].strip() + " " + LATER[1].strip()]
    assert jobs[1].previous_text == FIRST.strip()
    speaker.on_text(". ")  # whole now, and gathered: the listener has enough again
    assert len(sent_jobs(rt)) == 2
    speaker.finish("")  # the rest goes when the reply ends
    assert [j.text for j in sent_jobs(rt)][2] == LATER[2].strip()
    assert speaker.pieces == [(0, 1), (1, 2), (3, 1)] and speaker._timer is None
    assert [j.seq for j in sent_jobs(rt)] == [0, 1, 2]
    assert [j.text for j in sent_jobs(rt)] == pieces_of(speaker)  # stored with the answer


def test_a_piece_holds_at_most_max_piece_chars(rt, monkeypatch):
    monkeypatch.setattr(reply_sentences, "MAX_PIECE_CHARS", 70)
    speaker = new_speaker(rt)
    fake_clock(speaker)
    speaker.on_text(FIRST + "".join(LATER))
    speaker.finish("")
    assert [len(j.text) <= 70 for j in sent_jobs(rt)[1:]] == [True, True]
    assert speaker.pieces == [(0, 1), (1, 2), (3, 1)]


def test_a_slow_model_does_not_keep_gathered_sentences_from_the_listener(rt):
    """The model sends no token for a while: the gathered sentence goes when the listener's
    audio runs low, without waiting for the next token."""
    speaker = new_speaker(rt)  # the real clock
    short = "Twenty five chars of it. "  # ~1.25 s at the quick rate: 0.25 s to spare
    speaker.on_text(short + LATER[0])
    speaker.on_text("More")  # cuts the second sentence: gathered for now
    assert len(sent_jobs(rt)) == 1
    # No token comes: the listener's audio runs low (on the real clock) and the timer sends it.
    wait_until(lambda: len(sent_jobs(rt)) == 2, "the gathered sentence to go by the timer")
    assert [j.text for j in sent_jobs(rt)] == [short.strip(), LATER[0].strip()]
    speaker.close()


def test_a_stopped_step_sends_nothing_it_had_gathered(rt):
    speaker = new_speaker(rt)
    fake_clock(speaker)
    speaker.on_text(FIRST + LATER[0] + "More")
    speaker.close()  # cancelled, or the model failed
    speaker.finish("")
    assert len(sent_jobs(rt)) == 1 and speaker._timer is None


def test_a_step_streamed_again_sends_the_pieces_of_the_first_attempt(rt):
    """The first attempt sent sentence 0 and named the piece of sentences 1-2, then died before
    sending it; the attempt after it gathers differently (the listener is in another place)
    but sends sentences 1-2 as that one piece, under its number, and no piece twice."""
    first = new_speaker(rt)
    fake_clock(first)
    first.on_text(FIRST + LATER[0] + LATER[1] + "And")
    turn = first.stage.turn_id
    # What its hand-off did before it died: named the piece and recorded its words.
    named = completion.allocate(rt, turn, "1:1", 2, said=(
        rt.keys.said(turn, 1), [LATER[0].strip(), LATER[1].strip()]))
    assert len(sent_jobs(rt)) == 1
    again = Speaker(attempt(first, 2), step=1)
    again.gather = False  # each sentence alone, were it not for the earlier attempt's piece
    again.resume()
    again.on_text(FIRST + LATER[0] + LATER[1] + LATER[2])
    again.finish("")
    jobs = sent_jobs(rt)
    assert [j.text for j in jobs] == [FIRST.strip(), LATER[0].strip() + " " + LATER[1].strip(),
                                      LATER[2].strip()]
    assert jobs[1].seq == named.seq and again.pieces == [(0, 1), (1, 2), (3, 1)]


def attempt(speaker: Speaker, n: int) -> Stage:
    """The stage of attempt ``n`` of the speaker's step (a redelivery of the same job)."""
    old = speaker.stage
    return Stage(old.rt, old.spec, "agent", n, task_id=old.task_id)


ALPHA = "Alpha one opens the answer here. Alpha two comes next. Alpha three ends it."
BETA = ("Beta one opens differently now. Beta two follows it. Beta three ends it. "
        "Beta four is one more.")


def test_a_step_asked_again_keeps_what_it_spoke_as_its_answer_s_start(rt):
    """The first attempt spoke its first sentence and died; the model words the answer
    differently when asked again: the answer is the sentence spoken, then the new answer after
    its own first sentence; the pieces sent are that answer, each once."""
    first = new_speaker(rt)
    fake_clock(first)
    first.on_text(ALPHA)  # the first sentence is sent at once; the rest is gathered
    assert [j.text for j in sent_jobs(rt)] == ["Alpha one opens the answer here."]
    first.close()  # killed
    again = Speaker(attempt(first, 2), step=1)
    fake_clock(again)
    again.resume()
    for word in BETA.split(" "):
        again.on_text(word + " ")
    again.finish(BETA)
    said = again.said(BETA)
    assert said == ("Alpha one opens the answer here. Beta two follows it. Beta three ends it. "
                    "Beta four is one more.")
    assert " ".join(j.text for j in sent_jobs(rt)) == said  # what is recorded is what is heard
    assert [j.seq for j in sent_jobs(rt)] == list(range(len(sent_jobs(rt))))
    assert rt.redis.lrange(rt.keys.said(first.stage.turn_id, 1), 0, -1) == [
        s.encode() for s in again.sentences]


def test_every_piece_spoken_before_starts_the_answer_gathered_ones_too(rt):
    """Killed after two pieces (the second gathered two sentences): the answer keeps all three
    sentences, in their pieces, and goes on with the new wording's fourth."""
    first = new_speaker(rt)
    clock = fake_clock(first)
    first.on_text(FIRST + "".join(LATER[:2]))
    clock[0] += 2.5  # the listener runs low: the gathered piece goes with the next token
    first.on_text("And")
    assert len(sent_jobs(rt)) == 2 and first.pieces == [(0, 1), (1, 2)]
    first.close()  # killed
    again = Speaker(attempt(first, 2), step=1)
    fake_clock(again)
    again.resume()
    again.on_text(BETA)
    again.finish(BETA)
    kept = [FIRST.strip(), LATER[0].strip(), LATER[1].strip()]
    assert again.sentences == [*kept, "Beta four is one more."]
    assert [j.text for j in sent_jobs(rt)] == [kept[0], f"{kept[1]} {kept[2]}",
                                               "Beta four is one more."]
    assert again.said(BETA) == " ".join(j.text for j in sent_jobs(rt))


def test_a_piece_recorded_and_not_sent_is_sent_with_its_recorded_words(rt):
    """Killed between recording a piece and sending it: the next attempt sends those words
    (not its model's), at once, under the piece's number."""
    speaker = new_speaker(rt)
    turn = speaker.stage.turn_id
    alpha = "Alpha one is here."
    piece = completion.allocate(rt, turn, "1:0", 1, said=(rt.keys.said(turn, 1), [alpha]))
    again = Speaker(attempt(speaker, 2), step=1)
    again.resume()
    assert [(j.seq, j.text) for j in sent_jobs(rt)] == [(piece.seq, alpha)]
    again.on_text("Beta one is here. Beta two is there. ")
    again.finish("")
    assert again.said("Beta one is here. Beta two is there.") == f"{alpha} Beta two is there."
    assert [j.text for j in sent_jobs(rt)] == [alpha, "Beta two is there."]


def test_a_first_attempt_and_a_text_turn_keep_no_earlier_words(rt):
    speaker = new_speaker(rt)
    turn = speaker.stage.turn_id
    completion.allocate(rt, turn, "1:0", 1, said=(rt.keys.said(turn, 1), ["Alpha one is here."]))
    speaker.resume()  # attempt 1: there is no earlier attempt to ask about
    assert speaker.sentences == [] and speaker.said("Beta.") == "Beta."


def test_a_superseded_attempt_can_neither_record_nor_send_a_piece(rt):
    """Its lease lost, a zombie attempt stops at its next piece: nothing recorded or sent."""
    speaker = new_speaker(rt)
    stage = speaker.stage
    old = Stage(rt, stage.spec, "agent", 1, task_id=f"{stage.turn_id}.agent.1")
    rt.redis.set(rt.keys.deliveries(old.task_id), 2)  # attempt 2 began
    zombie = Speaker(old, step=1)
    with pytest.raises(Fenced):
        zombie.on_text(ALPHA)
    assert sent_jobs(rt) == [] and rt.redis.llen(rt.keys.said(stage.turn_id, 1)) == 0


def test_a_stored_answer_is_spoken_again_in_its_pieces_only_where_unsent(rt):
    speaker = new_speaker(rt)
    fake_clock(speaker)
    speaker.on_text(FIRST + "".join(LATER))
    speaker.finish("")
    sent = sent_jobs(rt)
    replay = Speaker(speaker.stage, step=1)
    replay.resend(speaker.sentences)
    assert sent_jobs(rt) == sent  # all were sent: nothing again
    assert replay.pieces == speaker.pieces  # in the extents they were named with
    rt.redis.hdel(rt.keys.turn(speaker.stage.turn_id), f"sent:{sent[-1].seq}")
    Speaker(speaker.stage, step=1).resend(speaker.sentences)
    again = sent_jobs(rt)
    assert len(again) == len(sent) + 1 and again[-1].text == sent[-1].text
    assert again[-1].seq == sent[-1].seq  # the same job: its receiver runs it once


def test_a_piece_sent_by_the_timer_is_sent_in_the_step_s_context(rt, monkeypatch):
    """The step's context (its trace span lives there) reaches the timer's send."""
    step_span: contextvars.ContextVar[str] = contextvars.ContextVar("step_span", default="none")
    seen: list[str] = []
    real_send = handoff.send

    def send(*args: object, **kwargs: object) -> None:
        seen.append(step_span.get())
        real_send(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(handoff, "send", send)
    step_span.set("agent.step")
    speaker = new_speaker(rt)
    speaker.on_text("Twenty five chars of it. " + LATER[0] + "More")
    wait_until(lambda: len(sent_jobs(rt)) == 2, "the gathered sentence to go by the timer")
    assert len(sent_jobs(rt)) == 2 and seen == ["agent.step", "agent.step"]
    speaker.close()


def test_a_turn_that_is_not_spoken_sends_no_piece_live_or_replayed(rt):
    speaker = new_speaker(rt, speak=False)
    fake_clock(speaker)
    speaker.on_text(FIRST + "".join(LATER))
    speaker.finish("")
    assert speaker.sentences and speaker.pieces == [] and sent_jobs(rt) == []
    Speaker(speaker.stage, step=1).resend(speaker.sentences)  # a step run again
    assert sent_jobs(rt) == []
    assert rt.redis.hget(rt.keys.turn(speaker.stage.turn_id), "tts_sent") is None


def test_a_pause_after_a_number_and_its_full_stop_sends_the_sentence(rt):
    """ "…is 156." may go on "…156.5": held at its mark until the next token, or until the
    model pauses (before a tool call, while it thinks), which ends it."""
    speaker = new_speaker(rt)  # the real clock
    speaker.on_text("Twelve times thirteen is 156.")
    assert sent_jobs(rt) == [] and speaker._pause_timer is not None
    wait_until(lambda: len(sent_jobs(rt)) == 1, "the held sentence to go after the pause")
    assert [j.text for j in sent_jobs(rt)] == ["Twelve times thirteen is 156."]
    speaker.on_text(" Anything else?")
    speaker.finish("")
    assert [j.text for j in sent_jobs(rt)] == ["Twelve times thirteen is 156.", "Anything else?"]
    assert speaker.sentences == ["Twelve times thirteen is 156.", "Anything else?"]


def test_a_token_before_the_pause_decides_the_held_mark(rt, monkeypatch):
    monkeypatch.setattr(reply_sentences, "PAUSE_ENDS_SENTENCE_S", 60.0)  # no pause comes
    speaker = new_speaker(rt)
    speaker.on_text("It is 3.")
    assert speaker._pause_timer is not None
    speaker.on_text("5 degrees in Lisbon today.")  # not an end after all
    assert speaker._pause_timer is None
    speaker.finish("")
    assert [j.text for j in sent_jobs(rt)] == ["It is 3.5 degrees in Lisbon today."]
    assert rt.timers.pending() == 0
