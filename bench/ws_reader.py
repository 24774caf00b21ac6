"""A WebSocket client whose messages are read on the caller's thread, for the floor's one voice
connection per turn (``bench.cpu_floor.floor_speak_ws``).

``websockets``' sync client (the one the ElevenLabs SDK's ``convert_realtime`` uses) reads the
socket on a thread of its own, which wakes at every frame however long its reader pauses: the
opposite of what the floor measures (pauses let the audio pile up, then one read takes it
all). Here the socket is read only when the caller asks for a message and none is parsed
yet, so a read after a pause takes every frame that piled up, in one system call.
``websockets``' own protocol (sans-I/O) does the framing; ``send`` may be called from another
thread.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import TracebackType

from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

READ_BYTES = 256 * 1024


class WebSocket:
    def __init__(self, url: str, headers: dict[str, str]) -> None:
        uri = parse_uri(url)
        if uri.secure:
            raise ValueError("ws:// only (the floor's fake providers)")
        self.sock = socket.create_connection((uri.host, uri.port), timeout=30)
        self.protocol = ClientProtocol(uri)
        self.lock = threading.Lock()
        request = self.protocol.connect()
        for name, value in headers.items():
            request.headers[name] = value
        with self.lock:
            self.protocol.send_request(request)
            self._flush()
        self._pending: list[bytes] = []
        self._eof = False
        while not any(isinstance(e, Response) for e in self._read()):
            if self._eof:
                raise ConnectionError("the server closed before its handshake's answer")
        if self.protocol.handshake_exc is not None:
            raise self.protocol.handshake_exc

    def send(self, text: str) -> None:
        with self.lock:
            self.protocol.send_text(text.encode())
            self._flush()

    def __iter__(self) -> Iterator[bytes]:
        """Each text message's payload, until the server closes."""
        while True:
            while self._pending:
                yield self._pending.pop(0)
            if self.protocol.close_rcvd is not None or self._eof:
                return
            self._read()

    def _read(self) -> list[object]:
        """One read of the socket (all that is there, or wait for some); its events."""
        data = self.sock.recv(READ_BYTES)
        with self.lock:
            if data:
                self.protocol.receive_data(data)
            else:
                self._eof = True
                self.protocol.receive_eof()
            events = self.protocol.events_received()
            self._flush()  # a pong, or the answer to a close
        for event in events:
            opcode = getattr(event, "opcode", None)
            if opcode is Opcode.TEXT:
                assert event.fin, "the voice sends whole messages"  # type: ignore[attr-defined]
                self._pending.append(event.data)  # type: ignore[attr-defined]
        return events

    def _flush(self) -> None:
        for chunk in self.protocol.data_to_send():
            if chunk:
                self.sock.sendall(chunk)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WebSocket:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
