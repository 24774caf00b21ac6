"""The client's blocking reads, consumed from asyncio: an iterator drained in its own thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_END = object()


async def in_thread(make: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
    """Yield what ``make()`` yields, read in a daemon thread (one per stream, so a slow turn
    never holds up another connection's)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()

    def put(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens any more
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        try:
            for item in make():
                put(("item", item))
        except BaseException as exc:  # handed over to the awaiting side
            put(("error", exc))
        else:
            put(("end", _END))

    threading.Thread(target=pump, name="wyoming-turn", daemon=True).start()
    while True:
        kind, value = await queue.get()
        if kind == "item":
            yield value
        elif kind == "error":
            raise value
        else:
            return
