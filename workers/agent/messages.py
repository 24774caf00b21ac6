"""Builders for the chat messages of a session's history (OpenAI chat-completions shape)."""

from __future__ import annotations

from typing import Any

from voxqueue.contracts import ToolOutcome

Message = dict[str, Any]

#: The keys of a chat message the OpenAI API accepts; ours (``say``, ``reasoning``) are dropped
#: before a call.
_WIRE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def assistant_tool_calls(calls: list[dict[str, str]], text: str | None = None,
                         reasoning: list[dict[str, Any]] | None = None) -> Message:
    """The assistant's request for tools: ``calls`` are ``{id, name, arguments}``;
    ``reasoning``, the Responses API's reasoning items that led to them, is kept beside them
    (passed back by that API's provider, never sent to Chat Completions)."""
    return {
        **({"reasoning": reasoning} if reasoning else {}),
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


def tool_result(call_id: str, content: str, say: str | None = None) -> Message:
    """A call's result; ``say``, the tool's sentence for the ear, is kept beside it in the
    history (for the offline agent) and never sent to a model."""
    message: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if say:
        message["say"] = say
    return message


def tool_error(call_id: str, message: str) -> Message:
    """A failed call, worded so the model can correct itself."""
    text = message if message.startswith("Error") else f"Error: {message}"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def from_outcome(outcome: ToolOutcome) -> Message:
    if outcome.ok:
        return tool_result(outcome.call_id, outcome.content, outcome.say)
    return tool_error(outcome.call_id, outcome.content)


def for_model(messages: list[Message]) -> list[Message]:
    """The history as a model API takes it: only the keys of its wire format."""
    return [m if m.keys() <= _WIRE_KEYS else {k: v for k, v in m.items() if k in _WIRE_KEYS}
            for m in messages]


#: What a call left unanswered is told when the history is repaired.
ENDED_BEFORE_RESULT = ("the turn was interrupted before this call finished; it may or may not "
                       "have been done")


def repaired(messages: list[Message]) -> list[Message]:
    """The history with every tool call answered right after the message that made it, as
    OpenAI requires anywhere in the list: each call's first answer found anywhere is moved
    there, a call with none gets an error, and a tool message answering no call is dropped.
    A valid history comes back unchanged (equal)."""
    answers: dict[str, Message] = {}
    for m in messages:
        if m.get("role") == "tool":
            answers.setdefault(str(m.get("tool_call_id")), m)
    out: list[Message] = []
    for m in messages:
        if m.get("role") == "tool":
            continue  # placed with its call below (or dropped: no call asked for it)
        out.append(m)
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                out.append(answers.pop(call["id"]) if call["id"] in answers
                           else tool_error(call["id"], ENDED_BEFORE_RESULT))
    return out
