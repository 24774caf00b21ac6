"""The chaos test's fakes and checks can fail: each check is shown a broken case it must catch
(and a sound one it must pass), without a running system."""

from __future__ import annotations

from typing import Any

from testkit.fakes.chaos_model import (
    ChaosProviders,
    heard_text,
    speech_with_transcript,
    transcript_in,
    voice_pcm,
)
from tests.reliability.chaos_ledger import (
    Findings,
    TurnRecord,
    check_effects,
    check_history,
    recorded_reply,
    spoken_problems,
)
from voxqueue.audio import to_wav
from voxqueue.contracts import TurnEvent
from voxqueue.turns import StreamEntry

Message = dict[str, Any]
SYSTEM: Message = {"role": "system", "content": "be brief"}


def call(call_id: str, name: str = "inscribe") -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def line(call_id: str, run: str) -> Message:
    return {"turn": "t1", "call": call_id, "run": run, "pid": 1}


def test_the_voice_is_decoded_back_and_a_splice_is_heard():
    assert heard_text(voice_pcm("Hello there.") + voice_pcm("Bye.")) == "Hello there.Bye."
    spliced = voice_pcm("Hello there.")[:100] + voice_pcm("Hello there.")[90:]
    assert "\ufffd" in heard_text(spliced)


def test_speech_carries_its_transcript_through_a_wav():
    pcm = speech_with_transcript(b"\x01\x00" * 800, "Session 1 turn 2: note t1x2")
    assert transcript_in(to_wav(pcm)) == "Session 1 turn 2: note t1x2"
    assert transcript_in(to_wav(b"\x00\x00" * 100)) is None


def test_the_model_words_an_answer_again_differently_and_quotes_its_tools():
    fake = ChaosProviders(seed=7, tool_share=0.0)
    asked: list[Message] = [SYSTEM, {"role": "user", "content": "how is the garden"}]
    first, again = fake._pick_chat(asked), fake._pick_chat(asked)
    assert first["content"] != again["content"]
    assert fake._pick_chat([*asked[:1], {"role": "user", "content": "other"}]) != first
    calls = ChaosProviders(seed=7, tool_share=1.0)._pick_chat(asked)["tool_calls"]
    assert 1 <= len(calls) <= 3 and calls[0]["name"] == "inscribe"
    after = [*asked, {"role": "assistant", "tool_calls": [call("c1")]},
             tool("c1", "Error: it may or may not have run")]
    assert "Error: it may or may not have run." in fake._pick_chat(after)["content"]


def test_an_effect_twice_and_false_outcomes_are_found():
    history: list[Message] = [SYSTEM, {"role": "user", "content": "u"},
               {"role": "assistant", "tool_calls": [call("a"), call("b"), call("c"),
                                                     call("d")]},
               tool("a", "inscribed as run 0123456789ab"),  # told it ran: no such run
               tool("b", "Error: the turn ended before this tool ran."),  # but it ran
               tool("c", "Error: inscribe was interrupted and may or may not have run"),
               tool("d", "inscribed as run 00000000000d")]  # true
    ledger = [line("b", "00000000000b"), line("c", "00000000000c"),
              line("d", "00000000000d"), line("d", "0000000000d2"), line("x", "00000000000x")]
    found = Findings()
    check_effects(found, {"s": history}, ledger)
    assert len(found.effects_twice) == 1 and "call d" in found.effects_twice[0]
    assert [f.split(":")[0] for f in found.false_outcomes] == [
        "session s, call a", "session s, call b", "call x of turn t1 ran but no history holds "
        "its call"]
    assert len(found.uncertain) == 1 and "call c" in found.uncertain[0]
    sound = Findings()
    told: list[Message] = [*history[:2], {"role": "assistant", "tool_calls": [call("a")]},
            tool("a", "inscribed as run 00000000000a")]
    check_effects(sound, {"s": told}, [line("a", "00000000000a")])
    assert sound.false_outcomes == [] and sound.effects_twice == []


def test_a_user_message_between_a_call_and_its_result_is_an_invalid_history():
    asked: Message = {"role": "assistant", "tool_calls": [call("a")]}
    good: list[Message] = [SYSTEM, {"role": "user", "content": "u"}, asked, tool("a", "x")]
    found = Findings()
    check_history(found, "s", good)
    assert found.invalid_histories == []
    check_history(found, "s", [*good[:3], {"role": "user", "content": "next"}, good[3]])
    check_history(found, "s", [*good, asked, tool("a", "x")])  # the same call id again
    assert len(found.invalid_histories) == 2


def entry(n: int, type_: Any, pcm: bytes | None = None, **data: object) -> StreamEntry:
    return StreamEntry(f"{n}-0", TurnEvent(type=type_, turn_id="t", data=data), pcm)


def test_spoken_not_recorded_is_found():
    reply = "Sure thing, the garden looks fine. Talk soon."
    history: list[Message] = [SYSTEM, {"role": "user", "content": "note tag1 please"},
               {"role": "assistant", "content": reply}]
    entries = [entry(1, "tts-start", seq=0, text="Sure thing, the garden looks fine."),
               entry(2, "tts-chunk", voice_pcm("Sure thing, the garden looks fine."), seq=0,
                     idx=0, attempt=1, offset=0),
               entry(3, "tts-end", seq=0),
               entry(4, "tts-start", seq=1, text="Talk soon."),
               entry(5, "tts-chunk", voice_pcm("Talk soon."), seq=1, idx=0, attempt=1,
                     offset=0),
               entry(6, "tts-end", seq=1), entry(7, "reply", text=reply),
               entry(8, "run-end", status="ok")]
    turn = TurnRecord("t", "s", 0, "text", "tag1", 0.0, entries=entries)
    assert recorded_reply(history, "tag1") == reply
    assert spoken_problems(turn, reply) == []
    assert spoken_problems(turn, "Of course, the garden looks fine. Talk soon.") != []
    assert spoken_problems(turn, None) != []
    wrong = entry(5, "tts-chunk", voice_pcm("Talk soon?"), seq=1, idx=0, attempt=1, offset=0)
    turn.entries = [*entries[:4], wrong, *entries[5:]]
    assert any("heard" in p for p in spoken_problems(turn, reply))
