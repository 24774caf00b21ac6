"""Speak while thinking: sentences go to TTS as the LLM streams, and play back in order."""

from __future__ import annotations

import pytest

from tests.conftest import RedisServer, System, system_env
from voxqueue.sessions import Sessions

pytestmark = pytest.mark.integration

REPLY = ("The first sentence is ready early. The second one follows a little later. "
         "And the third closes the reply.")


def order(turn) -> list[str]:
    return [e.event.type for e in turn._entries]


def test_first_audio_arrives_before_the_llm_has_finished(client, fake):
    fake.set_profile(llm_tokens_per_s=6)  # ~20 tokens: the reply takes over 3 s to stream
    fake.script_chat({"match": "stream", "content": REPLY})
    turn = client.ask("stream please", session="stream")
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    seen = order(turn)
    assert seen.index("tts-chunk") < seen.index("llm-end"), seen
    ends = [e.event.data["seq"] for e in turn._entries if e.event.type == "tts-end"]
    assert sorted(ends) == [0, 1, 2]
    assert result.reply == REPLY
    # Each sentence is synthesized knowing the one before it (ElevenLabs' previous_text).
    first, second, third = ("The first sentence is ready early.",
                            "The second one follows a little later.",
                            "And the third closes the reply.")
    sent = {r["json"]["text"]: r["json"].get("previous_text") for r in fake.requests_for("tts")}
    assert sent == {first: None, second: first, third: second}


def test_a_later_sentence_starts_with_a_larger_chunk_while_earlier_audio_plays(client, fake):
    """Sentence 0's first chunk goes out as soon as it is there; a later sentence, which the
    listener hears after the earlier ones' audio, starts with a larger one (fewer chunks)."""
    fake.set_profile(llm_tokens_per_s=6)  # later sentences come while sentence 0 plays
    fake.script_chat({"match": "larger", "content": REPLY})
    turn = client.ask("larger chunks please", session="larger")
    played = b"".join(turn.playback(timeout=60))
    assert turn.wait(timeout=5).status == "ok"
    first = {e.event.data["seq"]: e.event.data["bytes"] for e in turn._entries
             if e.event.type == "tts-chunk" and e.event.data["idx"] == 0}
    assert sorted(first) == [0, 1, 2]
    assert first[1] > first[0] and first[2] > first[0], first
    assert played == turn.audio()


MARKDOWN_REPLY = ("**Sure!** Here is how:\n\n1. Open the [garden app](https://example.com/garden?id=42)."
                  "\n2. Press `start` 🚀\n\n## Tip\n- water *before* 9am 🌱\n")


def test_a_markdown_reply_is_spoken_as_plain_sentences_and_kept_as_written(client, fake):
    fake.set_profile(llm_tokens_per_s=200)
    fake.script_chat({"match": "garden", "content": MARKDOWN_REPLY})
    turn = client.ask("how do I water the garden", session="markdown")
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    assert result.reply == MARKDOWN_REPLY.strip()  # events and history keep the model's text
    # Each list item is a sentence of its own; no markup, URL or emoji reaches the voice. The
    # pieces (a sentence, or later sentences gathered) are synthesized in parallel, so the voice
    # may be asked in any order; they are heard in their turn's order (seq).
    spoken = ["Sure! Here is how.", "Open the garden app.", "Press start.",
              "Tip. Water before 9am."]
    said = [r["json"]["text"] for r in fake.requests_for("tts")]
    starts = sorted((e.event.data["seq"], e.event.data["text"]) for e in turn._entries
                    if e.event.type == "tts-start")
    assert sorted(said) == sorted(text for _seq, text in starts), said
    assert starts[0][1] == spoken[0]  # the first piece goes alone, at once
    assert " ".join(text for _seq, text in starts) == " ".join(spoken), starts
    history = Sessions(client.redis, client.keys, client.settings).history("markdown") or []
    assert history[-1]["content"] == MARKDOWN_REPLY.strip()


def test_playback_is_in_order_when_a_later_sentence_finishes_first(client, fake):
    fake.set_profile(llm_tokens_per_s=30)
    fake.inject("tts", delay=1.5)  # the first sentence's synthesis is slow
    fake.script_chat({"match": "order", "content": "A fairly long first sentence here. Short."})
    turn = client.ask("order please", session="order")
    played = b"".join(turn.playback(timeout=60))
    ends = [e.event.data["seq"] for e in turn._entries if e.event.type == "tts-end"]
    assert ends == [1, 0], "precondition: sentence 1 finished before sentence 0"
    assert played == turn.audio()
    first_len = sum(e.event.data["bytes"] for e in turn._entries
                    if e.event.type == "tts-chunk" and e.event.data["seq"] == 0)
    assert played[:first_len] == b"".join(
        e.pcm for e in turn._entries if e.event.type == "tts-chunk" and e.event.data["seq"] == 0)


def test_tool_call_fragments_are_reassembled_with_text_beside_them(client, fake):
    fake.script_chat(
        {"match": "weather and sum", "content": "Let me check both.",
         "tool_calls": [{"name": "add_numbers", "arguments": {"a": 20, "b": 22}},
                        {"name": "calculate", "arguments": {"expression": "6 * 7"}}]},
        {"after_tool": True, "content": "Both are 42."})
    turn = client.ask("weather and sum", session="frag")
    result = turn.wait(timeout=60)
    assert result.status == "ok", result.error
    assert sorted(c.result for c in result.tool_calls) == ["42", "6 times 7 is 42."]
    llm_end = [e.event.data for e in turn._entries if e.event.type == "llm-end"]
    assert llm_end[0]["usage"]["total_tokens"] > 0  # usage recorded per step
    assert llm_end[0]["ttfb_ms"] is not None
    # The preamble was spoken too, before the answer.
    starts = [e.event.data for e in turn._entries if e.event.type == "tts-start"]
    assert len(starts) == 2
    history = fake.chat_requests()[-1]["messages"]
    assert history[-3]["content"] == "Let me check both."
    assert len(history[-3]["tool_calls"]) == 2


def test_one_turn_is_spoken_by_several_tts_workers_and_heard_in_order(fake, tmp_path):
    """Two TTS worker processes taking one sentence at a time share one turn's sentences."""
    server = RedisServer()
    server.start()
    # Each sentence a TTS job of its own (not gathered), so that there are four to share.
    system = System(system_env(server.url, fake, VOXQUEUE_GATHER_SENTENCES="false"),
                    tmp_path / "logs", beat=False)
    try:
        sup = system.sup
        sup.start_workers(queues=("agent", "tts"), pools={"tts": ("threads", 1)},
                          processes={"tts": 2})
        sup.wait_for_workers(("agent", "tts"), names=("tts", "tts-2"))
        fake.set_profile(tts_rtf=0.5, llm_tokens_per_s=200)  # sentences overlap in synthesis
        fake.script_chat({"match": "several", "content": REPLY + " A fourth ends it."})
        turn = system.client().ask("several voices", session="several")
        played = b"".join(turn.playback(timeout=60))
        assert turn.wait(timeout=5).status == "ok"
        starts = {e.event.data["seq"]: e.event.data["worker"]
                  for e in turn._entries if e.event.type == "tts-start"}
        assert sorted(starts) == [0, 1, 2, 3]
        assert {w.split("@")[0] for w in starts.values()} == {"tts", "tts-2"}, starts
        in_order = b"".join(e.pcm for e in sorted(
            (e for e in turn._entries if e.event.type == "tts-chunk"),
            key=lambda e: (e.event.data["seq"], e.event.data["idx"])))
        assert played == in_order == turn.audio()
    finally:
        system.stop()
        server.stop()

