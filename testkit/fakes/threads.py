"""Serving an asyncio (aiohttp) fake from a background thread with its own event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable


def serve_in_thread(start: Callable[[], Awaitable[None]],
                    name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """Run ``start()`` on a new loop in a daemon thread, then keep the loop serving.

    Returns once the server is up; raises what ``start()`` raised.
    """
    loop = asyncio.new_event_loop()
    started = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:
            errors.append(exc)
            return
        finally:
            started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    started.wait(10)
    if errors:
        raise errors[0]
    return loop, thread
