"""What every LLM provider speaks: the ``ChatModel`` protocol and its answer types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class StreamStopped(Exception):
    """Raised by an ``on_text`` callback to stop the answer mid-stream (the turn was cancelled,
    barged in on, or passed its deadline). Providers let it through unchanged."""


@dataclass(frozen=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: str
    """Raw JSON text, validated by the tool before the call."""

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class Answer:
    """One model answer: text, tool calls, or both."""

    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    ttfb_ms: float | None = None
    finish_reason: str | None = None
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    """The model's reasoning items (the Responses API's, encrypted content included), kept
    with the answer's tool calls in the history and passed back on the next step."""


class ChatModel(Protocol):
    """Answers a conversation, possibly with tool calls."""

    name: str

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                 deadline: float, on_text: Callable[[str], None] | None = None) -> Answer: ...
