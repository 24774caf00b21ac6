"""What built-in tools need at call time: the process's Runtime (settings, Redis, keys).

Tools take only the model's arguments; everything else comes from here, so tests can swap in
their own Runtime with :func:`use_runtime` instead of a parameter the model would see.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from workers.tools.context import current_call

if TYPE_CHECKING:
    from workers.runtime.resources import Runtime

_override: ContextVar[Runtime | None] = ContextVar("voxqueue_tool_runtime", default=None)


def runtime() -> Runtime:
    """The Runtime set by :func:`use_runtime`, else the worker process's own."""
    chosen = _override.get()
    if chosen is not None:
        return chosen
    from workers.app import app

    return app.runtime


@contextmanager
def use_runtime(rt: Runtime) -> Iterator[Runtime]:
    """Run tools against ``rt`` inside the block (the executor's threads inherit it)."""
    token = _override.set(rt)
    try:
        yield rt
    finally:
        _override.reset(token)


def owner() -> str:
    """Whose data a call touches: the device that asked, else its session, else "local"."""
    call = current_call()
    if call is None:
        return "local"
    return call.device or call.session_id or "local"
