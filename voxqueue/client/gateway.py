"""A device's side of the gateway: the same API as :class:`voxqueue.client.direct.Client`, over HTTP
with the device's token, and no Redis at all; a command streamed while it is spoken goes over a
WebSocket (:class:`GatewaySpeechStream`, the gateway's side of
:class:`voxqueue.client.direct.SpeechStream`: ``write``, ``end``, ``abort``, ``turn``).

:func:`connect_client` gives the client a process should use: through the gateway when one is
configured, else Redis.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import ssl
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from voxqueue.client.direct import Client, Turn
from voxqueue.client.errors import InputError, Unavailable
from voxqueue.contracts import TurnEvent, TurnSpec
from voxqueue.contracts.gateway import Entries, GatewayError, TurnCreated
from voxqueue.settings import ClientSettings, get_client_settings
from voxqueue.turns import StreamEntry


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


def refuse_plain_http(url: str, allowed: bool) -> None:
    """A device's token goes over ``https://``, or ``http://`` to this machine only, unless
    plain HTTP was allowed (``VOXQUEUE_GATEWAY_ALLOW_HTTP``): :class:`ValueError` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"VOXQUEUE_GATEWAY_URL must be https:// (got {parts.scheme}://)")
    if parts.scheme == "https" or allowed or _loopback(parts.hostname or ""):
        return
    raise ValueError(f"VOXQUEUE_GATEWAY_URL is plain http:// to {parts.hostname}: the device's "
                     f"token would cross the network in clear. Use https:// (the gateway's "
                     f"--certfile/--keyfile, or a TLS proxy), or set "
                     f"VOXQUEUE_GATEWAY_ALLOW_HTTP=true on a network you trust")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GatewayClient:
    """Starts turns through the gateway and follows them. Thread-safe; reuse one per process.

    ``device`` arguments are ignored: the gateway knows the device from its token.
    """

    def __init__(self, settings: ClientSettings) -> None:
        if not settings.gateway.url or settings.gateway.device_token is None:
            raise ValueError("set VOXQUEUE_GATEWAY_URL and VOXQUEUE_DEVICE_TOKEN")
        refuse_plain_http(settings.gateway.url, settings.gateway.allow_http)
        self.settings = settings
        token = settings.gateway.device_token.get_secret_value()
        self.tls = (ssl.create_default_context(cafile=str(settings.gateway.ca_file))
                    if settings.gateway.ca_file else None)
        self.http = httpx.Client(base_url=settings.gateway.url.rstrip("/"),
                                 headers={"Authorization": f"Bearer {token}"},
                                 timeout=httpx.Timeout(15.0, connect=5.0),
                                 verify=self.tls or True)

    # -- turns ----------------------------------------------------------------------------------
    def ask(self, text: str, *, session: str | None = None, device: str | None = None,
            speak: bool = True, deadline_s: float | None = None) -> GatewayTurn:
        body = {"text": text, "session": session, "speak": speak, "deadline_s": deadline_s}
        made = self._created(self._call("POST", "/v1/turns", json=body))
        return GatewayTurn(self, self._spec(made, "text", text))

    def say(self, audio: str | Path | bytes, *, session: str | None = None,
            device: str | None = None, speak: bool = True, deadline_s: float | None = None,
            pcm_rate: int | None = None, created_at: float | None = None) -> GatewayTurn:
        data = Path(audio).read_bytes() if isinstance(audio, str | Path) else audio
        params: dict[str, Any] = {"speak": str(speak).lower()}
        if session is not None:
            params["session"] = session
        if deadline_s is not None:
            params["deadline_s"] = deadline_s
        if pcm_rate is not None:
            params["rate"] = pcm_rate
        made = self._created(self._call("POST", "/v1/turns/audio", params=params, content=data))
        return GatewayTurn(self, self._spec(made, "audio", None, created_at))

    def stream(self, *, session: str | None = None, device: str | None = None,
               speak: bool = True, deadline_s: float | None = None) -> GatewaySpeechStream:
        """A command written while it is spoken (16 kHz mono int16), as ``Client.stream``:
        the turn starts with the first frame. ``device`` is the token's own."""
        from websockets.exceptions import WebSocketException

        url = self._stream_url(16000, session, speak, deadline_s)
        try:
            ws = self._socket(url)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise Unavailable(f"the gateway's stream at {url.split('?')[0]} failed: "
                              f"{exc.__class__.__name__}: {exc}") from exc
        return GatewaySpeechStream(ws, lambda made: GatewayTurn(
            self, self._spec(made, "audio", None)))

    def _socket(self, url: str) -> ClientConnection:
        """The WebSocket at ``url``, with the device's token (and CA, over TLS)."""
        from voxqueue.tls_websocket import connect

        tls = {"ssl": self.tls} if self.tls is not None and url.startswith("wss:") else {}
        return connect(url, additional_headers={"Authorization": self.http.headers[
            "Authorization"]}, open_timeout=5, **tls)

    def _stream_url(self, rate: int, session: str | None, speak: bool,
                    deadline_s: float | None) -> str:
        params = {"rate": rate, "speak": str(speak).lower(),
                  **({"session": session} if session else {}),
                  **({"deadline_s": deadline_s} if deadline_s else {})}
        url = (self.settings.gateway.url or "").replace("http", "ws", 1).rstrip("/")
        return url + "/v1/turns/stream?" + urlencode(params)

    def say_frames(self, frames: Iterable[bytes], *, rate: int = 16000,
                   session: str | None = None, speak: bool = True,
                   deadline_s: float | None = None) -> GatewayTurn:
        """A turn from audio sent frame by frame while it is captured (16-bit mono PCM at
        ``rate``; at 16 kHz speech to text runs while the frames arrive)."""
        from websockets.exceptions import ConnectionClosed, WebSocketException

        url = self._stream_url(rate, session, speak, deadline_s)
        answers: list[dict[str, Any]] = []
        try:
            with self._socket(url) as ws:
                try:
                    for frame in frames:
                        ws.send(frame)
                    ws.send(json.dumps({"type": "end"}))
                except ConnectionClosed:
                    pass  # refused while sending (too large, rate): its reason is waiting
                try:
                    while True:  # the turn (at once, or at the end), or why it was refused
                        answers.append(json.loads(ws.recv(timeout=15)))
                except ConnectionClosed:
                    pass
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise Unavailable(f"the gateway's stream at {url.split('?')[0]} failed: "
                              f"{exc.__class__.__name__}: {exc}") from exc
        refused = next((a for a in answers if a.get("type") == "error"), None)
        started = next((a for a in answers if a.get("type") == "turn"), None)
        if refused is not None:
            raise InputError(str(refused.get("code", "refused")), str(refused.get("message")))
        if started is None:
            raise Unavailable("the gateway's stream closed without a turn")
        made = TurnCreated.model_validate({k: v for k, v in started.items() if k != "type"})
        return GatewayTurn(self, self._spec(made, "audio", None))

    def speak(self, text: str, *, device: str | None = None, session: str | None = None,
              deadline_s: float | None = None) -> GatewayTurn:
        """Have ``text`` said as it is on this device (an announcement read aloud)."""
        body = {"text": text, "session": session, "deadline_s": deadline_s}
        made = self._created(self._call("POST", "/v1/speak", json=body))
        return GatewayTurn(self, self._spec(made, "text", text))

    def ping(self) -> bool:
        try:
            return self.http.get("/v1/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def entries(self, path: str, after: str | None, wait_ms: int) -> Entries:
        """One long poll of a stream the device may read (its turn's events, announcements)."""
        params: dict[str, Any] = {"wait_ms": wait_ms}
        if after is not None:
            params["after"] = after
        answer = self._call("GET", path, params=params, timeout=wait_ms / 1000 + 10)
        return Entries.model_validate_json(answer.content)

    def cancel(self, turn_id: str) -> bool:
        """Cancel a turn of this device; False when it had already ended."""
        answer = self._call("POST", f"/v1/turns/{turn_id}/cancel")
        return bool(answer.json().get("cancelled", True))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The answer, or InputError (refused: its code) / Unavailable (not reached)."""
        try:
            answer = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the gateway at {self.settings.gateway.url} is unreachable: "
                              f"{exc.__class__.__name__}: {exc}") from exc
        if answer.status_code < 400:
            return answer
        try:
            refused = GatewayError.model_validate_json(answer.content)
        except ValueError:
            refused = GatewayError(code=f"http-{answer.status_code}", message=answer.text[:200])
        if answer.status_code in (502, 503, 504):
            raise Unavailable(f"the gateway answered {answer.status_code}: {refused.message}")
        raise InputError(refused.code, refused.message)

    def _created(self, answer: httpx.Response) -> TurnCreated:
        return TurnCreated.model_validate_json(answer.content)

    def _spec(self, made: TurnCreated, kind: str, text: str | None,
              created_at: float | None = None) -> TurnSpec:
        """The device's copy of what it needs of the turn (the server keeps the real one)."""
        return TurnSpec(turn_id=made.turn_id, session_id=made.session_id, input=kind,  # type: ignore[arg-type]
                        text=text, created_at=created_at or time.time(), deadline=made.deadline)


class GatewayTurn(Turn):
    """A turn followed through the gateway: the same events, playback and result as
    :class:`voxqueue.client.direct.Turn`."""

    client: GatewayClient  # type: ignore[assignment]

    def __init__(self, client: GatewayClient, spec: TurnSpec) -> None:
        super().__init__(client, spec)  # type: ignore[arg-type]

    def _read(self, block_ms: int) -> list[StreamEntry]:
        got = self.client.entries(f"/v1/turns/{self.turn_id}/events", self._last_id, block_ms)
        return [StreamEntry(e.id, TurnEvent.model_validate(e.event), e.pcm_bytes())
                for e in got.entries]

    def _give_up(self) -> bool:
        return False  # the server's sweeper ends overdue turns; its run-end is read if it comes

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        return self.client.cancel(self.turn_id)


#: Either client: the same API (ask, say, speak, ping, close; turns with events and playback).
AnyClient = Client | GatewayClient


def connect_client(settings: ClientSettings | None = None) -> AnyClient:
    """``GatewayClient`` when ``VOXQUEUE_GATEWAY_URL`` is set (a device: no Redis, its own
    token), else ``Client`` straight to Redis (a trusted single machine)."""
    chosen = settings or get_client_settings()
    return GatewayClient(chosen) if chosen.gateway.url else Client(chosen)
