"""A WebSocket to the voice, read on the caller's thread.

``websockets``' threaded client (the one the ElevenLabs SDK's ``convert_realtime`` uses) reads
the socket on a thread of its own, which wakes at every frame however long its reader pauses.
Here the socket is read only when the caller asks for a message and none is parsed yet, so a
read after a pause takes every frame that piled up meanwhile in one system call (the pauses of
``workers/runtime/batching.py`` then save wake-ups, as they do for an HTTP stream).
``websockets``' own protocol (sans-I/O) does the handshake and the framing; ``send`` may be
called from another thread than the reader's (over TLS the session is entered by one thread at
a time: ``voxqueue.tls_websocket``).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from types import TracebackType

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidState, InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.uri import parse_uri

from voxqueue.tls_websocket import SerializedTLSSocket

#: The most read at once: what piles up in a pause of a few seconds of 16 kHz audio, as base64.
READ_BYTES = 256 * 1024


class SocketClosed(ConnectionError):
    """The connection ended before the caller did: ``code`` and ``reason`` of the close frame
    (1006 when the connection dropped without one)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"the voice's socket closed ({code} {reason})".strip())
        self.code, self.reason = code, reason


class VoiceSocket:
    """A client WebSocket (``ws://`` or ``wss://``) whose text messages are read on demand.

    Raises ``InvalidStatus`` (its ``response`` has the status and headers) when the server
    refuses the upgrade, ``OSError`` when it cannot be reached, ``TimeoutError`` when a read
    or the handshake waits longer than ``timeout``.
    """

    def __init__(self, url: str, headers: Mapping[str, str], *, timeout: float,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        uri = parse_uri(url)
        sock = socket.create_connection((uri.host, uri.port), timeout=timeout)
        try:
            if uri.secure:
                context = ssl_context or ssl.create_default_context()
                tls = SerializedTLSSocket(context.wrap_socket(sock, server_hostname=uri.host))
                tls.settimeout(timeout)
                sock = tls  # type: ignore[assignment]
            self.sock = sock
            self.protocol = ClientProtocol(uri)
            self._lock = threading.Lock()
            self._pending: deque[bytes] = deque()
            self._partial: list[bytes] = []  # a fragmented message's frames so far
            self._eof = False
            request = self.protocol.connect()
            for name, value in headers.items():
                request.headers[name] = value
            with self._lock:
                self.protocol.send_request(request)
                self._flush()
            while not any(isinstance(event, Response) for event in self._read()):
                if self._eof:
                    raise SocketClosed(1006, "closed before the handshake's answer")
            if self.protocol.handshake_exc is not None:
                raise self.protocol.handshake_exc
        except BaseException:
            sock.close()
            raise

    def send(self, text: str) -> None:
        """Send one text message (from any thread)."""
        with self._lock:
            try:
                self.protocol.send_text(text.encode())
            except InvalidState as exc:
                close = self.protocol.close_rcvd
                raise SocketClosed(close.code if close else 1006,
                                   close.reason if close else "") from exc
            self._flush()

    def messages(self) -> Iterator[bytes]:
        """Each text message's payload, until the server closes the connection cleanly (1000);
        any other end raises ``SocketClosed``."""
        while True:
            while self._pending:
                yield self._pending.popleft()
            if self._eof or self.protocol.close_rcvd is not None:
                close = self.protocol.close_rcvd
                if close is not None and close.code == 1000:
                    return
                raise SocketClosed(close.code if close else 1006, close.reason if close else "")
            self._read()

    def _read(self) -> list[Request | Response | Frame]:
        """One read of the socket: all that is there, or wait for something. Its events."""
        data = self.sock.recv(READ_BYTES)
        with self._lock:
            if data:
                self.protocol.receive_data(data)
            else:
                self._eof = True
                self.protocol.receive_eof()
            events = self.protocol.events_received()
            self._flush()  # a pong, or the answer to a close
        for event in events:
            if not isinstance(event, Frame):
                continue
            if event.opcode is Opcode.TEXT or (event.opcode is Opcode.CONT and self._partial):
                self._partial.append(bytes(event.data))
                if event.fin:
                    self._pending.append(b"".join(self._partial))
                    self._partial.clear()
        if self.protocol.close_rcvd is not None:
            self._eof = True
        return events

    def _flush(self) -> None:
        for chunk in self.protocol.data_to_send():
            if chunk:
                self.sock.sendall(chunk)

    def close(self) -> None:
        """Close the connection (a close frame if it is still open, then the socket)."""
        try:
            with self._lock:
                if self.protocol.state is State.OPEN:
                    self.protocol.send_close(1000)
                    self._flush()
        except OSError:
            pass
        finally:
            self.sock.close()

    def __enter__(self) -> VoiceSocket:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["InvalidStatus", "SocketClosed", "VoiceSocket"]
