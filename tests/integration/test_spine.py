"""One turn end to end across real worker processes, real Redis and the fake providers."""

from __future__ import annotations

import json
import time

import pytest

from testkit.clock import wait_until
from testkit.waiting import tasks_of_turn
from tests.conftest import SPEECH
from voxqueue import InputError
from voxqueue.audio import rms

pytestmark = pytest.mark.integration


def types(turn) -> list[str]:
    return [e.event.type for e in turn._entries]


def events_of(turn, kind: str) -> list[dict]:
    return [e.event.data for e in turn._entries if e.event.type == kind]


def test_spoken_question_gets_a_spoken_reply(client, fake):
    fake.script_transcripts("What time is it in Tokyo?")
    fake.script_chat(
        {"match": "tokyo", "tool_calls": [
            {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
        {"after_tool": True, "content": "It is late evening in Tokyo. Anything else?"},
    )
    turn = client.say(SPEECH / "command_time.wav", session="spoken")
    result = turn.wait(timeout=30)

    assert result.status == "ok", result.error
    assert result.transcript == "What time is it in Tokyo?"
    assert result.reply == "It is late evening in Tokyo. Anything else?"
    assert [c.name for c in result.tool_calls] == ["get_current_time"]
    assert "Asia/Tokyo" in (result.tool_calls[0].result or "")
    seen = types(turn)
    assert seen[0] == "run-start" and seen[-1] == "run-end"
    for expected in ("stt-start", "stt-end", "agent-step", "tool-start", "tool-end", "reply",
                     "tts-start", "tts-chunk", "tts-end"):
        assert expected in seen, expected
    # The claim check: the STT request carried real audio, the job only a key.
    stt = fake.requests_for("transcriptions")
    assert stt and stt[0]["file_size"] > 10_000
    # Two sentences, spoken in order, as real (non-silent) PCM.
    assert sorted({d["seq"] for d in events_of(turn, "tts-end")}) == [0, 1]
    audio = turn.audio()
    assert len(audio) > 16000 and rms(audio) > 100
    # The second LLM call saw the tool result linked by its tool_call_id.
    second = fake.chat_requests()[-1]["messages"]
    call_id = second[-2]["tool_calls"][0]["id"]
    assert second[-1] == {"role": "tool", "tool_call_id": call_id,
                          "content": result.tool_calls[0].result}


def test_two_tool_calls_run_in_parallel(client, fake):
    fake.script_chat(
        {"match": "both", "tool_calls": [
            {"name": "sleep_one", "arguments": {"label": "a"}},
            {"name": "sleep_one", "arguments": {"label": "b"}}]},
        {"after_tool": True, "content": "Both done."},
    )
    turn = client.ask("do both", session="parallel", speak=False)
    result = turn.wait(timeout=30)
    assert result.status == "ok", result.error
    ends = events_of(turn, "tool-end")
    assert sorted(e["result"] for e in ends) == ["slept:a", "slept:b"]
    (a, b) = [(e["started_at"], e["started_at"] + e["ms"] / 1000) for e in ends]
    # Each began before the other ended: they ran at the same time (whatever the machine's
    # speed; one after the other, the second would start after the first's end).
    assert a[0] < b[1] and b[0] < a[1], f"the two calls did not overlap: {a}, {b}"
    # Results go back in call order, each with its own tool_call_id.
    messages = fake.chat_requests()[-1]["messages"]
    ids = [c["id"] for c in messages[-3]["tool_calls"]]
    assert [m["tool_call_id"] for m in messages[-2:]] == ids
    assert [m["content"] for m in messages[-2:]] == ["slept:a", "slept:b"]
    # The step after the tools waited on a queue for milliseconds, not for the tools' second
    # (which `voxqueue trace` shows as the tools' own spans).
    after = [e for e in events_of(turn, "agent-step") if e["step"] == 2]
    assert after and after[0]["queue_ms"] < min(e["ms"] for e in ends), after


def test_every_tool_error_reaches_the_model_as_a_tool_message(client, fake):
    bad = [
        {"id": "c_unknown", "name": "no_such_tool", "arguments": {}},
        {"id": "c_json", "name": "add_numbers", "arguments": '{"a": 1, "b": '},
        {"id": "c_invalid", "name": "add_numbers", "arguments": {"a": "one", "b": 2}},
        {"id": "c_raise", "name": "explode", "arguments": {"reason": "kaboom"}},
        {"id": "c_timeout", "name": "hang", "arguments": {"seconds": 3}},
    ]
    fake.script_chat({"match": "break", "tool_calls": bad},
                     {"after_tool": True, "content": "I could not do that."})
    result = client.ask("break everything", session="errors", speak=False).wait(timeout=30)
    assert result.status == "ok", result.error
    messages = fake.chat_requests()[-1]["messages"]
    tool_msgs = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(tool_msgs) == {c["id"] for c in bad}
    assert "no tool named 'no_such_tool'" in tool_msgs["c_unknown"]
    assert "add_numbers" in tool_msgs["c_unknown"]  # it lists what exists
    assert "not valid JSON" in tool_msgs["c_json"]
    assert "invalid arguments for add_numbers" in tool_msgs["c_invalid"]
    assert "a:" in tool_msgs["c_invalid"]
    assert "kaboom" in tool_msgs["c_raise"]
    assert "did not finish within 0.5 s" in tool_msgs["c_timeout"]
    assert all(v.startswith("Error") for v in tool_msgs.values())
    codes = {c.name: c.error for c in result.tool_calls}
    assert all(codes.values())


def test_step_cap_ends_a_runaway_loop_with_a_clear_reply(client, fake):
    fake.script_chat({"match": "forever", "repeat": True,
                      "tool_calls": [{"name": "add_numbers", "arguments": {"a": 1, "b": 1}}]})
    turn = client.ask("loop forever", session="runaway", speak=True)
    result = turn.wait(timeout=60)
    assert result.status == "error"
    assert result.error and result.error["code"] == "agent-step-cap"
    assert "8 steps" in (result.reply or "")
    assert len(fake.chat_requests()) == 8
    assert len(turn.audio()) > 0  # the explanation is spoken


def test_two_sessions_at_once_get_their_own_answers(client, fake):
    fake.script_chat({"match": "apples", "content": "Apples are red."},
                     {"match": "pears", "content": "Pears are green."})
    turns = [client.ask("tell me about apples", session="s-apples", speak=False),
             client.ask("tell me about pears", session="s-pears", speak=False)]
    results = [t.wait(timeout=30) for t in turns]
    assert [r.reply for r in results] == ["Apples are red.", "Pears are green."]


def test_turns_of_one_session_never_interleave(client, fake):
    fake.script_chat(
        {"match": "first", "tool_calls": [{"name": "sleep_one", "arguments": {"label": "1"}}]},
        {"after_tool": True, "content": "First done."},
        {"match": "second", "content": "Second done."},
    )
    first = client.ask("first question", session="serial", speak=False)
    second = client.ask("second question", session="serial", speak=False)
    assert first.wait(timeout=30).status == "ok"
    assert second.wait(timeout=30).status == "ok"
    history = [json.loads(m) for m in client.redis.lrange(client.keys.messages("serial"), 0, -1)]
    roles = [(m["role"], (m.get("content") or "")[:6]) for m in history]
    assert roles == [("system", roles[0][1]), ("user", "first "), ("assistant", ""),
                     ("tool", "slept:"), ("assistant", "First "), ("user", "second"),
                     ("assistant", "Second")]


def test_oversized_audio_is_refused_before_anything_is_enqueued(client, fake, tmp_path):
    big = tmp_path / "big.wav"
    big.write_bytes(b"RIFF" + b"\0" * (client.settings.turns.max_audio_bytes + 10))
    before = client.redis.dbsize()
    with pytest.raises(InputError) as err:
        client.say(big)
    assert err.value.code == "audio-too-large"
    assert "VOXQUEUE_MAX_AUDIO_BYTES" in str(err.value)
    assert client.redis.dbsize() == before
    assert fake.requests_for("transcriptions") == []


def test_cancel_stops_the_turn_in_every_stage(client, fake):
    fake.inject("chat", delay=2.0)
    turn = client.ask("slow question", session="cancel")
    wait_until(lambda: any(e.event.type == "llm-start" for e in client.store.history(turn.turn_id)),
               "the model's call")
    turn.cancel()  # during the model's (2 s) call
    result = turn.wait(timeout=30)
    assert result.status == "cancelled"
    assert "tts-start" not in types(turn)


def test_cancel_mid_stream_stops_the_llm_stream_and_queues_no_more_speech(client, fake):
    fake.set_profile(llm_tokens_per_s=12)  # a six-sentence reply streams for about 5 s
    reply = " ".join(f"This is sentence number {n} of a long answer." for n in range(6))
    fake.script_chat({"match": "long streamed answer", "content": reply})
    turn = client.ask("a long streamed answer please", session="cancel-stream")
    store = client.store
    give_up = time.time() + 20
    while not any(e.event.type == "tts-start" for e in store.history(turn.turn_id)):
        assert time.time() < give_up, "no sentence was spoken"
        time.sleep(0.05)
    turn.cancel()

    def sentences_sent() -> int:
        return int(client.redis.hget(client.keys.turn(turn.turn_id), "tts_sent") or 0)

    at_cancel = sentences_sent()
    # Every stage has stopped (the rest of the reply would stream for seconds more if not).
    wait_until(lambda: not tasks_of_turn(client.redis, turn.turn_id), "every stage to stop",
               timeout=30)
    assert sentences_sent() <= at_cancel + 1 < 6, "sentences were still queued after the cancel"
    assert "llm-end" not in [e.event.type for e in store.history(turn.turn_id)]
    assert turn.wait(timeout=10).status == "cancelled"


def test_deadline_ends_a_stuck_turn_with_a_timeout(client, fake):
    fake.inject("chat", delay=4.0)
    turn = client.ask("very slow question", session="deadline", deadline_s=1.5)
    result = turn.wait(timeout=30)
    assert result.status == "timeout"
    assert result.error and result.error["code"] == "timeout"
    assert types(turn).count("run-end") == 1


def test_transcribe_only_ends_the_turn_with_its_transcript(client, fake):
    fake.script_transcripts("just the words please")
    turn = client.transcribe(SPEECH / "command_time.wav")
    result = turn.wait(timeout=30)
    assert result.status == "ok", result.error
    assert result.transcript == "just the words please" and result.reply is None
    assert "stt-end" in types(turn) and "llm-start" not in types(turn)
    assert "tts-start" not in types(turn)
    assert fake.chat_requests() == [] and fake.requests_for("tts") == []
    # a transcription takes no place in its session's line
    assert client.redis.zcard(client.keys.session_waiting(turn.session_id)) == 0
    assert client.redis.llen(client.keys.messages(turn.session_id)) == 0
