"""What built-in tools need at call time: the process's Runtime (settings, Redis, keys).

Tools take only the model's arguments; everything else comes from here, so tests can swap in
their own Runtime with :func:`use_runtime` instead of a parameter the model would see.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from workers.tools.context import current_call, owner_of

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
    """Whose data a call touches, with its kind: ``device:<name>`` that asked, else
    ``session:<id>``, else ``local`` (see :func:`workers.tools.context.owner_of`)."""
    call = current_call()
    if call is None:
        return "local"
    return owner_of(call.device, call.session_id)
