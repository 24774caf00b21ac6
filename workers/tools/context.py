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
    utterance: str | None = None
    """The person's own words this turn (the executor reads them from the turn); None when
    the call is not part of a turn the executor could read."""


_current: ContextVar[ToolCall | None] = ContextVar("voxqueue_tool_call", default=None)


def current_call() -> ToolCall | None:
    """The call being executed, when a tool runs inside a turn (None in plain Python)."""
    return _current.get()


def set_current_call(call: ToolCall | None) -> None:
    _current.set(call)


def owner_of(device: str | None, session_id: str | None) -> str:
    """Whose tool state a call touches, with its kind: ``device:<name>``, else
    ``session:<id>``, else ``local``; a session named "kitchen" is not device kitchen."""
    if device:
        return f"device:{device}"
    if session_id:
        return f"session:{session_id}"
    return "local"
