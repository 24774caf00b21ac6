"""What a running tool may know: its call (turn, session, device) and its worker's Runtime.

Tools take only the model's arguments; the rest comes from here. The tools worker's executor
sets both for every call (:func:`use_runtime`, :func:`set_current_call`); tests do the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.runtime.resources import Runtime


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

    @property
    def idempotency_key(self) -> str:
        """The same for every run of this call (``turn:call``), never for another call: a
        side-effecting tool passes it on (or dedupes on it) to make its effect happen once."""
        return f"{self.turn_id}:{self.call_id}"


_current: ContextVar[ToolCall | None] = ContextVar("voxqueue_tool_call", default=None)
_runtime: ContextVar[Runtime | None] = ContextVar("voxqueue_tool_runtime", default=None)


def current_call() -> ToolCall | None:
    """The call being executed, when a tool runs inside a turn (None in plain Python)."""
    return _current.get()


def set_current_call(call: ToolCall | None) -> None:
    _current.set(call)


def runtime() -> Runtime:
    """The Runtime the tool runs against (set by the executor, or by :func:`use_runtime`)."""
    chosen = _runtime.get()
    if chosen is None:
        raise RuntimeError("this tool needs a worker's Runtime: run it through the tools "
                           "worker, or inside `with use_runtime(rt):`")
    return chosen


@contextmanager
def use_runtime(rt: Runtime) -> Iterator[Runtime]:
    """Run tools against ``rt`` inside the block (the executor's threads inherit it)."""
    token = _runtime.set(rt)
    try:
        yield rt
    finally:
        _runtime.reset(token)


def owner_of(device: str | None, session_id: str | None) -> str:
    """Whose tool state a call touches, with its kind: ``device:<name>``, else
    ``session:<id>``, else ``local``; a session named "kitchen" is not device kitchen."""
    if device:
        return f"device:{device}"
    if session_id:
        return f"session:{session_id}"
    return "local"


def owner() -> str:
    """Whose data the current call touches (see :func:`owner_of`); ``local`` outside a call."""
    call = current_call()
    if call is None:
        return "local"
    return owner_of(call.device, call.session_id)
