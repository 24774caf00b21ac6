"""Long-lived MCP sessions: one per server per worker process, on a background event loop.

Starting a stdio server costs most of a second, so a session is opened on first use and kept:
later calls only send a request. Each session is owned by one task that holds the SDK's
``async with Client(...)`` open (its task groups must be entered and left by the same task);
calls from any thread are run on the loop next to it. A session whose server went away is
dropped and opened afresh. The call that found it gone is made again on the new session only
when that is safe: the request was never written, or the tool changes nothing (``retry``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio
import structlog

log = structlog.get_logger("voxqueue.tools")
T = TypeVar("T")

#: Raised when the request could not be written: the server never saw it.
_NOT_SENT = (anyio.ClosedResourceError, anyio.BrokenResourceError, BrokenPipeError)


def _connection_closed(exc: BaseException) -> bool:
    """The SDK's "Connection closed" (the server went away, before or during the call)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED


class _Session:
    """One open session; ``run`` is its owner task."""

    def __init__(self, open_client: Callable[[], Any]) -> None:
        self._open_client = open_client
        self.client: Any = None
        self.error: BaseException | None = None
        self.ready = asyncio.Event()
        self.closing = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        try:
            async with self._open_client() as client:
                self.client = client
                self.ready.set()
                await self.closing.wait()
        except BaseException as exc:  # the SDK reports a failed start as exception groups
            self.error = exc
        finally:
            self.client = None
            self.ready.set()


class McpSessions:
    """Open sessions by server name, created lazily and anew after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None
        self._sessions: dict[str, _Session] = {}

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child starts its own
                self._loop = asyncio.new_event_loop()
                self._pid = os.getpid()
                self._sessions = {}
                threading.Thread(target=self._loop.run_forever, name="mcp-sessions",
                                 daemon=True).start()
            return self._loop

    def submit(self, key: str, open_client: Callable[[], Any], name: str,
               arguments: dict[str, Any], timeout_s: float, *, retry: bool) -> Future[Any]:
        """Call tool ``name`` on the session ``key`` (opened with ``open_client`` if needed).

        ``retry``: the tool changes nothing, so it may run again if its server went away.
        """

        async def call_tool(client: Any) -> Any:
            return await client.call_tool(name, arguments)

        coro = self._run(key, open_client, call_tool, timeout_s, retry)
        return asyncio.run_coroutine_threadsafe(coro, self._running_loop())

    def run(self, key: str, open_client: Callable[[], Any],
            operation: Callable[[Any], Awaitable[T]], timeout_s: float) -> T:
        """Run ``operation(client)`` on the session ``key`` and wait for it (e.g. list tools:
        the session is then open before the first call)."""
        coro = self._run(key, open_client, operation, timeout_s, True)
        return asyncio.run_coroutine_threadsafe(coro, self._running_loop()).result(timeout_s + 5)

    async def _run(self, key: str, open_client: Callable[[], Any],
                   operation: Callable[[Any], Awaitable[T]], timeout_s: float,
                   retry: bool) -> T:
        async with asyncio.timeout(timeout_s):
            for attempt in (1, 2):
                session = await self._open(key, open_client)
                try:
                    return await operation(session.client)
                except Exception as exc:
                    not_sent = isinstance(exc, _NOT_SENT)
                    if not (not_sent or _connection_closed(exc)):
                        raise
                    self._drop(key, session, "its server went away")
                    if attempt == 2 or not (not_sent or retry):
                        raise
        raise AssertionError("unreachable")

    async def _open(self, key: str, open_client: Callable[[], Any]) -> _Session:
        session = self._sessions.get(key)
        if session is None or (session.ready.is_set() and session.client is None):
            session = _Session(open_client)
            self._sessions[key] = session
            session.task = asyncio.get_running_loop().create_task(session.run())
        await session.ready.wait()
        if session.client is None:
            self._sessions.pop(key, None)
            error = session.error or RuntimeError("the session closed")
            raise error
        return session

    def _drop(self, key: str, session: _Session, why: str) -> None:
        if self._sessions.get(key) is session:
            del self._sessions[key]
        session.closing.set()
        log.info("MCP session dropped; the next call opens a new one", server=key, why=why)
