"""A cap on the tool calls of one answer: the first ones run, the rest are answered with an
error the model can act on, and the history stays one OpenAI accepts."""

from __future__ import annotations

import json

import pytest

from tests.reliability.ledger import history_problems

pytestmark = pytest.mark.integration


def test_calls_past_the_cap_are_answered_not_run(client, fake):
    calls = [{"name": "add_numbers", "arguments": {"a": i, "b": 1}} for i in range(10)]
    fake.script_chat({"match": "ten sums", "tool_calls": calls},
                     {"after_tool": True, "content": "Done."})
    result = client.ask("ten sums please", session="tool-cap", speak=False).wait(timeout=30)
    assert result.status == "ok", result.error
    assert len(result.tool_calls) == 8, "the cap (VOXQUEUE_MAX_TOOL_CALLS_PER_ANSWER) is 8"
    history = [json.loads(m) for m in client.redis.lrange(client.keys.messages("tool-cap"), 0, -1)]
    assert history_problems(history) == []
    tool_messages = [m for m in history if m["role"] == "tool"]
    assert len(tool_messages) == 10
    assert all(m["content"].startswith("Error") for m in tool_messages[8:])
    assert [m["content"] for m in tool_messages[:3]] == ["1", "2", "3"]
