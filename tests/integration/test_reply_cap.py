"""A turn's reply has at most ``VOXQUEUE_REPLY_MAX_CHARS`` characters (the steps' answers
together): a model that answers at length is cut at its last sentence end that fits, before
anything past it is spoken or recorded, and the history records exactly what the TTS pieces
said. Real workers and Redis, the model faked at its HTTP boundary, streaming its answer."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from voxqueue.settings import TurnSettings

pytestmark = pytest.mark.integration

#: The workers' cap (the shared system runs with the default).
CAP = int(TurnSettings.model_fields["reply_max_chars"].default)


def sentences(n: int, word: str) -> list[str]:
    return [f"{word.capitalize()} sentence number {i} of this answer goes on for a while."
            for i in range(1, n + 1)]


#: A 20,000-character answer, in whole sentences.
LONG = " ".join(sentences(400, "this"))[:20_000]


def spoken_pieces(client: Any, turn_id: str) -> list[str]:
    """The text of each piece sent to TTS, in speaking order (``tts-start``)."""
    texts = {int(e.event.data["seq"]): str(e.event.data["text"])
             for e in client.store.history(turn_id) if e.event.type == "tts-start"}
    return [texts[s] for s in sorted(texts)]


def assistant_texts(client: Any, session: str) -> list[str]:
    return [m["content"] for m in map(json.loads, client.redis.lrange(
        client.keys.messages(session), 0, -1)) if m["role"] == "assistant" and m["content"]]


def longest_fitting(text: str, room: int) -> str:
    """The whole sentences of ``text`` (". "-separated) that fit in ``room``."""
    kept = ""
    for sentence in text.split(". "):
        grown = f"{kept} {sentence}." if kept else f"{sentence}."
        if len(grown) > room:
            break
        kept = grown
    return kept


def test_a_20000_character_reply_is_cut_at_a_sentence_end_and_recorded_as_spoken(client,
                                                                                 fake):
    assert len(LONG) == 20_000
    fake.script_chat({"match": "tell me everything", "content": LONG})
    session = f"cap-{uuid.uuid4().hex[:8]}"
    turn = client.ask("tell me everything", session=session)
    result = turn.wait(timeout=120)
    assert result.status == "ok", result.error

    spoken = " ".join(spoken_pieces(client, turn.turn_id))
    assert assistant_texts(client, session) == [spoken]  # recorded = spoken
    assert result.reply == spoken
    assert spoken == longest_fitting(LONG, CAP), "cut at the last sentence end that fits"
    assert CAP - 80 < len(spoken) <= CAP


def test_the_cap_holds_for_the_turn_s_steps_together(client, fake):
    """An answer's text beside its tool call is spoken too: the final answer gets what is left."""
    first = " ".join(sentences(16, "before"))  # ~1,000 characters, with a tool call
    fake.script_chat(
        {"match": "add it up", "content": first,
         "tool_calls": [{"name": "add_numbers", "arguments": {"a": 2, "b": 3}}]},
        {"after_tool": True, "content": LONG})
    session = f"cap-{uuid.uuid4().hex[:8]}"
    turn = client.ask("add it up at length", session=session)
    result = turn.wait(timeout=120)
    assert result.status == "ok", result.error

    said = assistant_texts(client, session)
    assert said[0] == first and said[1] == longest_fitting(LONG, CAP - len(first)), said
    assert " ".join(spoken_pieces(client, turn.turn_id)) == " ".join(said)
    assert len(said[0]) + len(said[1]) <= CAP
