"""Builders for the chat messages of a session's history (OpenAI chat-completions shape)."""

from __future__ import annotations

from typing import Any

from voxqueue.contracts import ToolOutcome

Message = dict[str, Any]


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def assistant_tool_calls(calls: list[dict[str, str]], text: str | None = None) -> Message:
    """The assistant's request for tools: ``calls`` are ``{id, name, arguments}``."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


def tool_result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tool_error(call_id: str, message: str) -> Message:
    """A failed call, worded so the model can correct itself."""
    text = message if message.startswith("Error") else f"Error: {message}"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def from_outcome(outcome: ToolOutcome) -> Message:
    if outcome.ok:
        return tool_result(outcome.call_id, outcome.content)
    return tool_error(outcome.call_id, outcome.content)


def unanswered_calls(messages: list[Message]) -> list[str]:
    """Ids of the last assistant message's tool calls that no tool message answers (a turn
    that ended, by cancel or deadline, between asking for tools and getting their results).
    OpenAI refuses every later request of the session until they are answered."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant":
            asked = [c["id"] for c in m.get("tool_calls") or []]
            answered = {t.get("tool_call_id") for t in messages[i + 1:] if t.get("role") == "tool"}
            return [c for c in asked if c not in answered]
    return []
