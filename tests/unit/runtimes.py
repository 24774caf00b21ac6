"""A worker runtime installed for tools under test, on a key prefix of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from workers.runtime.resources import Runtime
from workers.tool_registry.context import use_runtime


@contextmanager
def installed(runtime: Runtime) -> Iterator[Runtime]:
    """``runtime`` as the tools' runtime; its keys deleted and its client closed after."""
    with use_runtime(runtime):
        yield runtime
    keys = list(runtime.redis.scan_iter(match=f"{runtime.keys.prefix}:*"))
    if keys:
        runtime.redis.delete(*keys)
    runtime.redis.close()
