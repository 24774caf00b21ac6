"""A device's command streamed through the gateway while it is spoken: the WebSocket side of
:class:`voxqueue.speech_stream.SpeechStream` (``write``, ``end``, ``abort``, ``turn``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from voxqueue.contracts.gateway import TurnCreated
from voxqueue.errors import InputError, Unavailable

if TYPE_CHECKING:
    from voxqueue.gateway.remote import GatewayTurn


class GatewaySpeechStream:
    """Frames out as they are captured; the turn is known once the gateway has the first."""

    def __init__(self, ws: ClientConnection,
                 make_turn: Callable[[TurnCreated], GatewayTurn]) -> None:
        self.ws = ws
        self.make_turn = make_turn
        self._turn: GatewayTurn | None = None
        self.closed = False

    @property
    def turn(self) -> GatewayTurn:
        if self._turn is None:
            raise RuntimeError("the turn starts with the first frame")
        return self._turn

    def write(self, pcm: bytes) -> None:
        try:
            self.ws.send(pcm)
            if self._turn is None:
                self._turn = self._started(json.loads(self.ws.recv(timeout=10)))
        except ConnectionClosed as exc:
            self.closed = True
            raise self._why(exc) from exc

    def end(self, spoken_until: float | None = None) -> GatewayTurn:
        message: dict[str, Any] = {"type": "end"}
        if spoken_until is not None:
            message["spoken_until"] = spoken_until
        try:
            self.ws.send(json.dumps(message))
            while True:
                self.ws.recv(timeout=10)  # until the gateway closes
        except (ConnectionClosed, TimeoutError):
            pass
        finally:
            self.closed = True
            self.ws.close()
        return self.turn

    def abort(self, reason: str = "cancelled by the device") -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(ConnectionClosed):
                self.ws.send(json.dumps({"type": "cancel", "reason": reason[:200]}))
            self.ws.close()

    def _started(self, answer: dict[str, Any]) -> GatewayTurn:
        if answer.get("type") != "turn":
            raise InputError(str(answer.get("code", "refused")), str(answer.get("message")))
        made = TurnCreated.model_validate({k: v for k, v in answer.items() if k != "type"})
        return self.make_turn(made)

    def _why(self, exc: ConnectionClosed) -> Exception:
        code = exc.rcvd.code if exc.rcvd else None
        if code in (1009, 4400):
            return InputError("too-large" if code == 1009 else "refused",
                              f"the gateway refused the stream ({exc})")
        return Unavailable(f"the gateway's stream closed: {exc}")
