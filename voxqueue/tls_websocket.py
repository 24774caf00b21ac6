"""``websockets``' threaded client with its TLS session entered by one thread at a time.

The threaded client reads its socket on a thread of its own while the caller's thread writes
(and a keepalive thread pings). Over TLS both enter one OpenSSL session at once, which OpenSSL
does not allow and Python's ``ssl`` does not prevent. With TLS 1.3 the server's session
tickets come just after the handshake, as the client sends its upgrade request: measured here
(``docs/benchmarks.md``), 10 connections of 3,000 got no answer and then hung for good in
``connect`` (the reader blocked in ``SSL_read``, which closing a socket does not wake); none of
3,000 through this module, none with the tickets off. Every TLS WebSocket that
voxqueue opens with the threaded client (a device's streamed capture through the gateway, the
Realtime speech-to-text session through the OpenAI SDK) comes through here:
:class:`SerializedTLSSocket` holds one lock around each call into the session, switches the
socket to non-blocking, and waits for the network with the lock released.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as _connect

T = TypeVar("T")

#: The longest a wait for the network goes without looking whether the socket was closed:
#: closing a socket does not wake a thread waiting on it.
WAKE_S = 0.25


class SerializedTLSSocket:
    """The part of ``socket.socket`` that ``websockets.sync`` uses, over a TLS socket that only
    one thread at a time enters. ``recv`` and ``sendall`` wait for the network as long as
    ``settimeout`` says (no limit by default), then raise ``TimeoutError``, as a socket's."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._lock = threading.Lock()
        self._timeout: float | None = None
        self._closed = False

    def fileno(self) -> int:
        return self._sock.fileno()

    def getsockname(self) -> Any:
        return self._sock.getsockname()

    def getpeername(self) -> Any:
        return self._sock.getpeername()

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def recv(self, size: int) -> bytes:
        return self._enter(functools.partial(self._sock.recv, size), self._deadline())

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        deadline = self._deadline()
        while view:
            view = view[self._enter(functools.partial(self._sock.send, view), deadline):]

    def shutdown(self, how: int) -> None:
        """Half-close the connection; the session stays readable (``SSLSocket.shutdown`` would
        drop it, and later reads would return the raw records)."""
        with self._lock:
            socket.socket.shutdown(self._sock, how)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            with contextlib.suppress(OSError):  # not connected any more
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)  # wakes select() elsewhere
            self._sock.close()

    def _deadline(self) -> float | None:
        return None if self._timeout is None else time.monotonic() + self._timeout

    def _enter(self, call: Callable[[], T], deadline: float | None) -> T:
        """``call`` into the session under the lock; when the session wants the network, wait
        for it with the lock released and call again."""
        while True:
            with self._lock:
                self._check_open()
                try:
                    return call()
                except ssl.SSLWantReadError:  # a record not all here yet, or only a ticket
                    writing = False
                except ssl.SSLWantWriteError:
                    writing = True
            self._wait(writing, deadline)

    def _check_open(self) -> None:
        if self._closed:
            raise OSError(9, "the socket is closed")

    def _wait(self, writing: bool, deadline: float | None) -> None:
        """Until the socket is ready (``writing``: for writing), ``deadline`` passes
        (``TimeoutError``) or the socket is closed (``OSError``)."""
        while True:
            self._check_open()
            left = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError("timed out")
            fd = [self._sock]
            try:
                ready = select.select([] if writing else fd, fd if writing else [], [], left)
            except (OSError, ValueError):  # closed meanwhile
                self._check_open()
                raise
            if ready[0] or ready[1]:
                return


class SerializedTLSConnection(ClientConnection):
    """``websockets``' threaded client connection; over TLS, its socket is serialized."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        if isinstance(sock, ssl.SSLSocket):
            sock = SerializedTLSSocket(sock)  # type: ignore[assignment]
        super().__init__(sock, *args, **kwargs)


#: For clients that take ``websockets.sync.client.connect``'s options (the OpenAI SDK's
#: ``websocket_connection_options``).
CONNECTION_OPTIONS: dict[str, Any] = {"create_connection": SerializedTLSConnection}


def connect(url: str, **kwargs: Any) -> ClientConnection:
    """``websockets.sync.client.connect``, with :class:`SerializedTLSConnection`."""
    return _connect(url, create_connection=SerializedTLSConnection, **kwargs)


__all__ = ["CONNECTION_OPTIONS", "SerializedTLSConnection", "SerializedTLSSocket", "connect"]
