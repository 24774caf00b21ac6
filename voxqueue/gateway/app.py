"""The devices' only way in: HTTP in front of the queues (``voxqueue gateway``).

Every request carries a device token (``Authorization: Bearer …``); the device's name comes
from the token, never from the request. A device starts turns (text or audio), follows and
cancels its own turns, and reads its own announcements; it never touches Redis. Limits are the
server's: text length, audio size and length, deadline ceiling, and budgets per device (turns,
characters read aloud, its replies' included, seconds of speech, per minute and per hour; long
polls and sockets open at once), each refused with 429 and Retry-After.

``GET /v1/device`` names the device behind a token (the browser page says what it is paired as);
``/`` and ``/page/…`` are the browser page itself (:mod:`voxqueue.gateway.page`).

Following a stream is a long poll (``?after=ID&wait_ms=…``): each answer says where to go on
from, so a device that lost its connection resumes where it was and misses nothing.

Streamed capture: a device sends its utterance as audio frames over a WebSocket while the
person speaks (``/v1/turns/stream``).

The device authenticates with its ``Authorization`` header, or (a browser, which cannot set a
WebSocket's headers) by offering ``voxqueue.token.<token>`` as a subprotocol after
``voxqueue.v1``, which the gateway accepts; never in the URL. It sends binary frames (16-bit
mono PCM at ``?rate=``, 16 kHz by default), then a text
frame ``{"type": "end"}`` (optionally with ``"spoken_until"``, the audio time of its last voiced
frame), or ``{"type": "cancel"}`` to drop it. At 16 kHz the turn starts with the first frame
and the frames go on to the turn's speech stream as they arrive, so speech to text runs while
the person speaks; the gateway says ``{"type": "turn", "turn_id", "session_id", "deadline"}``
at once (the device may follow the turn's events, partial transcripts included, meanwhile).
At another rate the frames are collected (no more than the limits' seconds at that rate) and
the turn starts at the end. A refusal is ``{"type": "error", "code", "message"}``; the socket is
closed after the end. The server's limits hold while the frames arrive: the stream counts as a
turn of the device's budget when it opens (a spoken one holds characters for its reply from when
its turn starts), a device holds at most ``VOXQUEUE_GATEWAY_SOCKETS_PER_DEVICE`` of them at
once, the size (in bytes and seconds) and the number of frames are checked at every frame, a
socket lives at most the longest utterance plus ``VOXQUEUE_GATEWAY_STREAM_GRACE_S``, an idle
socket is closed after ``IDLE_S``, nothing is taken once the turn has ended, a revoked device's
socket is closed within ``VOXQUEUE_GATEWAY_REVOCATION_CHECK_S``, and a device that goes away
mid-utterance leaves a cancelled turn and no stream behind.

Also here (:class:`InFlight`): connections in flight, counted by each gateway process: what one
device may hold open at once. (Its budgets per minute and per hour are :mod:`voxqueue.budgets`,
shared with the workers.)
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import redis
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from voxqueue.audio import SAMPLE_RATE, SAMPLE_WIDTH
from voxqueue.budgets import SPEAK_CHARS, Budgets, Limit, OverBudget
from voxqueue.client.direct import Client, InputError, SpeechStream, Turn, Unavailable, new_id
from voxqueue.contracts import TurnSpec
from voxqueue.contracts.gateway import (
    DeviceInfo,
    Entries,
    GatewayError,
    TextTurnRequest,
    TurnCreated,
)
from voxqueue.gateway.access import Access, bearer
from voxqueue.gateway.devices import DeviceRegistry
from voxqueue.gateway.page import page_routes
from voxqueue.gateway.rules import Refused, deadline_of, rate_of, session_of
from voxqueue.gateway.streams import forget_read, read_after
from voxqueue.redis_conn import connect_async
from voxqueue.settings import ClientSettings
from voxqueue.turns import TurnNotFound


class InFlight:
    """Connections of one kind a device may hold at once, in this gateway process."""

    def __init__(self, kind: str, per_device: int) -> None:
        self.kind = kind
        self.per_device = per_device
        self.held: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, device: str) -> Iterator[None]:
        """Hold one for the block; :class:`Refused` (429) when the device holds them all."""
        if self.held.get(device, 0) >= self.per_device:
            raise Refused(429, "too-many-connections", f"this device has {self.per_device} "
                          f"{self.kind} open already", {"Retry-After": "1"})
        self.held[device] = self.held.get(device, 0) + 1
        try:
            yield
        finally:
            self.held[device] -= 1
            if not self.held[device]:
                del self.held[device]


#: Seconds a capture may go without a frame before the gateway gives up on it.
IDLE_S = 10.0

#: The WebSocket subprotocol a browser asks for: a browser cannot send an Authorization header
#: on a WebSocket, so it offers its token as a second subprotocol, ``voxqueue.token.<token>``
#: (never in the URL, which proxies and logs keep); the gateway accepts ``voxqueue.v1`` only.
SUBPROTOCOL = "voxqueue.v1"
TOKEN_SUBPROTOCOL = "voxqueue.token."  # noqa: S105 (a prefix, no secret)


def _protocols(offered: str) -> list[str]:
    return [p.strip() for p in offered.split(",") if p.strip()]


def subprotocol_token(offered: str) -> str | None:
    """The device token offered as a WebSocket subprotocol, or None."""
    tokens = [p.removeprefix(TOKEN_SUBPROTOCOL) for p in _protocols(offered)
              if p.startswith(TOKEN_SUBPROTOCOL)]
    return bearer(f"Bearer {tokens[0]}") if len(tokens) == 1 else None


#: WebSocket close codes: policy (unauthenticated), too big, and our own "refused".
POLICY, TOO_BIG, REFUSED = 1008, 1009, 4400


async def stream_turn(gw: Gateway, ws: WebSocket) -> None:
    """One utterance in frames, one turn out."""
    offered = ws.headers.get("sec-websocket-protocol", "")
    token = bearer(ws.headers.get("authorization", "")) or subprotocol_token(offered)
    device = await anyio.to_thread.run_sync(gw.devices.authenticate, token) if token else None
    if device is None or token is None:
        await ws.close(code=POLICY)  # before accepting: the handshake is refused (403)
        return
    await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in _protocols(offered) else None)
    speech: list[SpeechStream] = []  # the turn's stream, once it has begun
    lifetime = gw.settings.turns.max_audio_seconds + gw.settings.gateway.stream_grace_s
    try:
        with gw.sockets.slot(device):
            await gw.spend(device, gw.turns)  # a stream is a turn from the moment it opens
            await gw.spend(device, gw.audio_seconds, 0)
            await gw.access.while_allowed(device, token, lifetime,
                                          lambda: _capture(gw, ws, device, speech))
        await ws.close()
    except BaseException as exc:
        if speech and not speech[0].writer.closed:  # the turn goes with its stream
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(speech[0].abort, f"the device's stream failed: "
                                                                f"{exc.__class__.__name__}")
        await _refused(ws, exc)


async def _capture(gw: Gateway, ws: WebSocket, device: str, speech: list[SpeechStream]) -> None:
    q = ws.query_params
    rate = rate_of(q.get("rate"), SAMPLE_RATE)
    deadline = gw._deadline(q.get("deadline_s"))
    session, speak = session_of(device, q.get("session")), q.get("speak", "true") != "false"
    frames = Frames(gw.settings.gateway.stream_max_frames)
    if rate != SAMPLE_RATE:
        await _buffered(gw, ws, device, rate or SAMPLE_RATE, session, speak, deadline, frames)
        return
    first = await frames.next(ws)
    if not isinstance(first, bytes):  # ended or cancelled before any audio
        raise Refused(400, "invalid-input", "no audio before the end")
    async with gw.reply_held(device, speak, deadline) as turn_id:
        speech.append(await anyio.to_thread.run_sync(lambda: gw.client.stream(
            session=session, device=device, speak=speak, deadline_s=deadline, turn_id=turn_id)))
    stream = speech[0]
    await _send(ws, stream.turn)
    frame: bytes | dict[str, Any] = first
    while isinstance(frame, bytes):
        await anyio.to_thread.run_sync(stream.write, frame)
        frame = await frames.next(ws)
    if frame.get("type") == "cancel":
        await anyio.to_thread.run_sync(stream.abort, "cancelled by the device")
    else:
        until = frame.get("spoken_until")
        await anyio.to_thread.run_sync(
            stream.end, float(until) if isinstance(until, int | float) else None)
    await gw.spend(device, gw.audio_seconds, stream.writer.seconds, refuse=False)


async def _buffered(gw: Gateway, ws: WebSocket, device: str, rate: int, session: str,
                    speak: bool, deadline: float | None, frames: Frames) -> None:
    """Audio at another rate: collected, converted, and the turn started at the end."""
    limit = min(gw.settings.turns.max_audio_bytes,
                int(gw.settings.turns.max_audio_seconds * rate * SAMPLE_WIDTH))
    pcm = await _frames(ws, limit, frames)
    if pcm is None:
        return
    async with gw.reply_held(device, speak, deadline) as turn_id:
        turn = await anyio.to_thread.run_sync(lambda: gw.client.say(
            pcm, session=session, device=device, pcm_rate=rate, speak=speak,
            deadline_s=deadline, turn_id=turn_id))
    await gw.spend(device, gw.audio_seconds, turn.spec.audio_seconds or 0, refuse=False)
    await _send(ws, turn)


async def _frames(ws: WebSocket, limit: int, frames: Frames) -> bytes | None:
    """The utterance's PCM, or None when the device cancelled it."""
    chunks: list[bytes] = []
    size = 0
    while isinstance(frame := await frames.next(ws), bytes):
        size += len(frame)
        if size > limit:
            raise Refused(413, "too-large", f"the audio is over the limit of {limit} bytes "
                          f"(at most the limits' seconds at this rate)")
        chunks.append(frame)
    return None if frame.get("type") == "cancel" else b"".join(chunks)


class Frames:
    """The socket's frames, counted: no more than ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    async def next(self, ws: WebSocket) -> bytes | dict[str, Any]:
        self.count += 1
        if self.count > self.limit:
            raise Refused(413, "too-many-frames", f"a stream sends at most {self.limit} frames")
        return await _next(ws)


async def _send(ws: WebSocket, turn: Turn) -> None:
    await ws.send_text(json.dumps({"v": 1, "type": "turn", "turn_id": turn.turn_id,
                                   "session_id": turn.session_id,
                                   "deadline": turn.spec.deadline}))


async def _refused(ws: WebSocket, exc: BaseException) -> None:
    """Tell the device why its stream was refused (when it is still there), or re-raise."""
    if isinstance(exc, Refused):
        await _refuse(ws, exc.code, exc.message, TOO_BIG if exc.status == 413 else
                      POLICY if exc.status == 401 else REFUSED, exc.headers)
    elif isinstance(exc, InputError):
        await _refuse(ws, "too-large" if exc.code == "audio-too-large" else exc.code, str(exc),
                      TOO_BIG if exc.code == "audio-too-large" else REFUSED)
    elif isinstance(exc, ValueError):
        await _refuse(ws, "invalid-input", str(exc), REFUSED)
    elif isinstance(exc, Unavailable):
        await _refuse(ws, "unavailable", str(exc), 1011)
    elif isinstance(exc, TimeoutError):
        await _refuse(ws, "idle", f"no audio frame for {IDLE_S:g} s", REFUSED)
    elif not isinstance(exc, WebSocketDisconnect):  # the device went away: nothing to say
        raise exc


async def _next(ws: WebSocket) -> bytes | dict[str, Any]:
    """The next frame (bytes) or control message (``end``/``cancel``)."""
    with anyio.fail_after(IDLE_S):
        message: Any = await ws.receive()
    if message.get("type") == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    if message.get("bytes") is not None:
        return bytes(message["bytes"])
    control = json.loads(message.get("text") or "{}")
    if not isinstance(control, dict) or control.get("type") not in ("end", "cancel"):
        raise Refused(400, "invalid-input", f"unknown message {str(control)[:60]!r}")
    return control


async def _refuse(ws: WebSocket, code: str, message: str, close_code: int,
                  headers: dict[str, str] | None = None) -> None:
    said: dict[str, Any] = {"v": 1, "type": "error", "code": code, "message": message}
    if headers and "Retry-After" in headers:
        said["retry_after"] = int(headers["Retry-After"])
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # unless it went away
        await ws.send_text(json.dumps(said))
        await ws.close(code=close_code)


#: The longest a long poll waits for something new, in milliseconds.
MAX_WAIT_MS = 10_000

#: A text turn's JSON body, at most (the text limit itself is the setting's).
MAX_JSON_BYTES = 256 * 1024

#: A spoken turn holds its device's characters this long past its deadline (clocks differ).
HOLD_SLACK_S = 5.0

Handler = Callable[[Request, str], Awaitable[Response]]


class Gateway:
    """The handlers and what they share: one client, the device registry, the budgets."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = s = settings
        self.client = Client(settings)
        self.devices = DeviceRegistry(self.client.redis, self.client.keys)
        self.budgets = Budgets(self.client.redis, self.client.keys)
        self.turns = Limit("turns", "turns", s.gateway.turns_per_minute, s.gateway.turns_per_hour)
        self.speak_chars = Limit(SPEAK_CHARS, "characters", s.gateway.speak_chars_per_minute,
                                 s.gateway.speak_chars_per_hour, held=s.turns.reply_max_chars)
        self.audio_seconds = Limit("audio-seconds", "seconds of speech",
                                   s.gateway.audio_seconds_per_minute,
                                   s.gateway.audio_seconds_per_hour)
        self.polls = InFlight("long polls", s.gateway.polls_per_device)
        self.sockets = InFlight("streams", s.gateway.sockets_per_device)
        # Every wait is cut in slices of under a second: the timeout is far above the longest.
        self.aredis = connect_async(s, max_connections=s.gateway.redis_pool, timeout=5,
                                    socket_timeout=MAX_WAIT_MS / 1000 + 20,
                                    socket_connect_timeout=5)
        self.health_redis = connect_async(s, max_connections=2, socket_timeout=5,
                                          socket_connect_timeout=5)
        self.access = Access(self.aredis, self.client.keys, s.gateway.revocation_check_s)

    async def close(self) -> None:
        await self.aredis.aclose()
        await self.health_redis.aclose()
        self.client.close()

    # -- the device behind a request ----------------------------------------------------------
    def guarded(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """``handler(request, device)`` for an authenticated device; every refusal as JSON."""
        async def endpoint(request: Request) -> Response:
            try:
                device = await self._device(request)
                return await handler(request, device)
            except Refused as exc:
                return error(exc.status, exc.code, exc.message, exc.headers)
            except InputError as exc:
                status = 413 if "too-large" in exc.code or "too-long" in exc.code else 400
                return error(status, exc.code, str(exc))
            except (Unavailable, redis.RedisError) as exc:
                return error(503, "unavailable", f"the server cannot reach Redis: "
                             f"{exc.__class__.__name__}")
        return endpoint

    async def _device(self, request: Request) -> str:
        token = bearer(request.headers.get("authorization", ""))
        if token is None:
            raise Refused(401, "unauthenticated", "send Authorization: Bearer <device token>")
        device = await anyio.to_thread.run_sync(self.devices.authenticate, token)
        if device is None:
            raise Refused(401, "unauthenticated", "unknown or revoked device token")
        await anyio.to_thread.run_sync(self.devices.seen, device)
        request.state.token = token
        return device

    async def spend(self, device: str, limit: Limit, cost: float = 1, *,
                    refuse: bool = True, hold: tuple[str, float] | None = None) -> None:
        """Count ``cost`` of the device's budget; 429 with Retry-After when it is over."""
        try:
            await anyio.to_thread.run_sync(
                lambda: self.budgets.spend(device, limit, cost, refuse=refuse, hold=hold))
        except OverBudget as exc:
            raise Refused(429, "rate-limited", str(exc),
                          {"Retry-After": str(exc.retry_after)}) from exc

    @contextlib.asynccontextmanager
    async def reply_held(self, device: str, speak: bool,
                         deadline_s: float | None) -> AsyncIterator[str]:
        """A new turn's id; a spoken turn holds the device's characters for its reply until
        the reply is recorded or the turn ends (429 when they are used up, the replies in
        flight included). The hold goes if the block fails: no turn started."""
        turn_id = new_id()
        if not speak:
            yield turn_id
            return
        until = time.time() + (deadline_s or self.settings.turns.deadline_s) + HOLD_SLACK_S
        await self.spend(device, self.speak_chars, 0, hold=(turn_id, until))
        try:
            yield turn_id
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.budgets.release, device, self.speak_chars,
                                               turn_id)
            raise

    def _deadline(self, asked: float | str | None) -> float | None:
        return deadline_of(asked, self.settings.turns.max_deadline_s)

    def _own_turn(self, device: str, turn_id: str) -> TurnSpec:
        """The turn's spec, if the turn is this device's: another's is as good as unknown."""
        try:
            spec = self.client.store.spec(turn_id)
        except (TurnNotFound, ValidationError):
            spec = None
        if spec is None or spec.device != device:
            raise Refused(404, "not-found", f"no turn {turn_id} of this device")
        return spec

    # -- handlers -----------------------------------------------------------------------------
    async def _text_request(self, request: Request) -> TextTurnRequest:
        body = await self.read_body(request, MAX_JSON_BYTES)
        try:
            asked = TextTurnRequest.model_validate_json(body)
        except ValidationError as exc:
            raise Refused(400, "invalid-input", f"not a text turn: {exc.errors()[0]['msg']}") \
                from exc
        if len(asked.text) > self.settings.turns.max_text_chars:
            raise Refused(413, "text-too-long", f"the text has {len(asked.text)} characters, "
                          f"over the limit of {self.settings.turns.max_text_chars}")
        self._deadline(asked.deadline_s)
        return asked

    async def read_body(self, request: Request, limit: int) -> bytes:
        """The body, within ``limit`` bytes and ``VOXQUEUE_GATEWAY_BODY_TIMEOUT_S``."""
        with anyio.move_on_after(self.settings.gateway.body_timeout_s):
            return await read_body(request, limit)
        raise Refused(408, "too-slow", f"the body took over "
                      f"{self.settings.gateway.body_timeout_s:g} s")

    async def text_turn(self, request: Request, device: str) -> Response:
        asked = await self._text_request(request)
        await self.spend(device, self.turns)
        async with self.reply_held(device, asked.speak, asked.deadline_s) as turn_id:
            turn = await anyio.to_thread.run_sync(lambda: self.client.ask(
                asked.text, session=session_of(device, asked.session), device=device,
                speak=asked.speak, deadline_s=asked.deadline_s, turn_id=turn_id))
        return created(turn)

    async def speak(self, request: Request, device: str) -> Response:
        """Text said as it is, on this device only (an announcement read aloud)."""
        asked = await self._text_request(request)
        await self.spend(device, self.turns)
        await self.spend(device, self.speak_chars, len(asked.text))
        turn = await anyio.to_thread.run_sync(lambda: self.client.speak(
            asked.text, device=device, session=session_of(device, asked.session),
            deadline_s=asked.deadline_s))
        return created(turn)

    async def audio_turn(self, request: Request, device: str) -> Response:
        q = request.query_params
        session = session_of(device, q.get("session"))
        deadline = self._deadline(q.get("deadline_s"))
        rate = rate_of(q.get("rate"), None)
        await self.spend(device, self.turns)
        await self.spend(device, self.audio_seconds, 0)  # refused when used up already
        body = await self.read_body(request, self.settings.turns.max_audio_bytes)
        speak = q.get("speak", "true").lower() != "false"
        async with self.reply_held(device, speak, deadline) as turn_id:
            turn = await anyio.to_thread.run_sync(lambda: self.client.say(
                body, session=session, device=device, speak=speak, deadline_s=deadline,
                pcm_rate=rate, turn_id=turn_id))
        await self.spend(device, self.audio_seconds, turn.spec.audio_seconds or 0, refuse=False)
        return created(turn)

    async def turn_events(self, request: Request, device: str) -> Response:
        turn_id = request.path_params["turn_id"]
        await anyio.to_thread.run_sync(self._own_turn, device, turn_id)
        after, wait_ms = _poll_params(request, default_after="0")
        stream = self.client.keys.events(turn_id)
        with self.polls.slot(device):
            await forget_read(self.aredis, stream, after, False, self.settings.gateway.reply_ttl_s)
            entries = await read_after(self.aredis, stream, after, wait_ms,
                                       self._still(device, request))
        if any(e.event.get("type") == "run-end" for e in entries.entries):
            await forget_read(self.aredis, stream, None, True, self.settings.gateway.reply_ttl_s)
        return JSONResponse(entries.model_dump(mode="json"))

    def _still(self, device: str, request: Request) -> Callable[[], Awaitable[None]]:
        return lambda: self.access.still(device, request.state.token)

    async def cancel_turn(self, request: Request, device: str) -> Response:
        turn_id = request.path_params["turn_id"]
        spec = await anyio.to_thread.run_sync(self._own_turn, device, turn_id)
        await self.spend(device, self.turns)
        cancelled = await anyio.to_thread.run_sync(lambda: Turn(self.client, spec).cancel(
            "cancelled by the device"))
        return JSONResponse({"v": 1, "turn_id": turn_id, "cancelled": cancelled},
                            status_code=202)

    async def whoami(self, request: Request, device: str) -> Response:
        """The device behind the token (a page says what it was paired as)."""
        return JSONResponse(DeviceInfo(device=device).model_dump(mode="json"))

    async def announcements(self, request: Request, device: str) -> Response:
        stream = self.client.keys.announcements(device)
        after, wait_ms = _poll_params(request, default_after=None)
        with self.polls.slot(device):
            if after is None:  # the first read starts after the newest entry
                newest: Any = await self.aredis.xrevrange(stream, count=1)
                after = newest[0][0].decode() if newest else "0-0"
            entries: Entries = await read_after(self.aredis, stream, after, wait_ms,
                                                self._still(device, request))
        return JSONResponse(entries.model_dump(mode="json"))


def create_app(settings: ClientSettings) -> Starlette:
    """The gateway's ASGI application."""
    gw = Gateway(settings)

    async def health(request: Request) -> Response:
        try:
            ok = await gw.health_redis.ping()
        except redis.RedisError:
            ok = False
        return JSONResponse({"v": 1, "ok": bool(ok)}, status_code=200 if ok else 503)

    routes = [
        Route("/v1/health", health),
        Route("/v1/device", gw.guarded(gw.whoami)),
        Route("/v1/turns", gw.guarded(gw.text_turn), methods=["POST"]),
        Route("/v1/turns/audio", gw.guarded(gw.audio_turn), methods=["POST"]),
        Route("/v1/speak", gw.guarded(gw.speak), methods=["POST"]),
        Route("/v1/turns/{turn_id:str}/events", gw.guarded(gw.turn_events)),
        Route("/v1/turns/{turn_id:str}/cancel", gw.guarded(gw.cancel_turn), methods=["POST"]),
        Route("/v1/announcements", gw.guarded(gw.announcements)),
        WebSocketRoute("/v1/turns/stream", lambda ws: stream_turn(gw, ws)),
        *page_routes(),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await gw.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gw
    return app


# -- helpers -------------------------------------------------------------------------------------
def _poll_params(request: Request, default_after: str | None) -> tuple[str | None, int]:
    q = request.query_params
    after = q.get("after", default_after)
    if after is not None and not _is_stream_id(after):
        raise Refused(400, "invalid-input", f"after: a stream id like 1700000000000-0, "
                      f"got {after[:40]!r}")
    try:
        wait_ms = max(0, min(MAX_WAIT_MS, int(q.get("wait_ms", "0"))))
    except ValueError as exc:
        raise Refused(400, "invalid-input", "wait_ms: milliseconds") from exc
    return after, wait_ms


def _is_stream_id(text: str) -> bool:
    left, sep, right = text.partition("-")
    return left.isdigit() and len(text) < 48 and (not sep or right.isdigit())


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refused(413, "too-large", f"the body is {int(declared)} bytes, over the "
                      f"limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, "too-large", f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def created(turn: Turn) -> Response:
    body = TurnCreated(turn_id=turn.turn_id, session_id=turn.session_id,
                       deadline=turn.spec.deadline)
    return JSONResponse(body.model_dump(mode="json"), status_code=201)


def error(status: int, code: str, message: str,
          headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(GatewayError(code=code, message=message).model_dump(mode="json"),
                        status_code=status, headers=headers)
