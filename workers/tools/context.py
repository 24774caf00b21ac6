"""What a running tool may know about the call: its turn, session and device."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCall:
    turn_id: str
    session_id: str
    device: str | None
    call_id: str
    name: str


_current: ContextVar[ToolCall | None] = ContextVar("voxqueue_tool_call", default=None)


def current_call() -> ToolCall | None:
    """The call being executed, when a tool runs inside a turn (None in plain Python)."""
    return _current.get()


def set_current_call(call: ToolCall | None) -> None:
    _current.set(call)
