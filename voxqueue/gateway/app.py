"""The devices' only way in: HTTP in front of the queues (``voxqueue gateway``).

Every request carries a device token (``Authorization: Bearer …``); the device's name comes
from the token, never from the request. A device starts turns (text or audio), follows and
cancels its own turns, and reads its own announcements; it never touches Redis. Limits are the
server's: text length, audio size and length, deadline ceiling, turns per minute.

Following a stream is a long poll (``?after=ID&wait_ms=…``): each answer says where to go on
from, so a device that lost its connection resumes where it was and misses nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import redis
import redis.asyncio as aioredis
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from voxqueue.client import Client, InputError, Turn, Unavailable
from voxqueue.contracts import TurnSpec
from voxqueue.contracts.gateway import (
    Entries,
    GatewayError,
    TextTurnRequest,
    TurnCreated,
)
from voxqueue.devices import DeviceRegistry
from voxqueue.gateway.capture import stream_turn
from voxqueue.gateway.limits import RateLimiter
from voxqueue.gateway.rules import Refused, session_of
from voxqueue.gateway.streams import read_after
from voxqueue.settings import Settings
from voxqueue.turns import TurnNotFound

#: The longest a long poll waits for something new, in milliseconds.
MAX_WAIT_MS = 10_000
#: A text turn's JSON body, at most (the text limit itself is the setting's).
MAX_JSON_BYTES = 256 * 1024

Handler = Callable[[Request, str], Awaitable[Response]]


class Gateway:
    """The handlers and what they share: one client, the device registry, the rate limiter."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = Client(settings)
        self.devices = DeviceRegistry(self.client.redis, self.client.keys)
        self.limiter = RateLimiter(self.client.redis, self.client.keys,
                                   settings.gateway_turns_per_minute)
        self.aredis = aioredis.Redis.from_url(settings.redis_url)

    async def close(self) -> None:
        await self.aredis.aclose()
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
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Refused(401, "unauthenticated", "send Authorization: Bearer <device token>")
        device = await anyio.to_thread.run_sync(self.devices.authenticate, token.strip())
        if device is None:
            raise Refused(401, "unauthenticated", "unknown or revoked device token")
        await anyio.to_thread.run_sync(self.devices.seen, device)
        return device

    def _rate(self, device: str) -> None:
        retry_after = self.limiter.hit(device)
        if retry_after:
            raise Refused(429, "rate-limited", f"more than {self.limiter.per_minute} turns a "
                          "minute from this device", {"Retry-After": str(retry_after)})

    def _deadline(self, asked: float | None) -> float | None:
        if asked is not None and asked > self.settings.max_deadline_s:
            raise Refused(400, "invalid-input", f"deadline_s {asked} is over the server's "
                          f"ceiling of {self.settings.max_deadline_s} s")
        return asked

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
        body = await read_body(request, MAX_JSON_BYTES)
        try:
            asked = TextTurnRequest.model_validate_json(body)
        except ValidationError as exc:
            raise Refused(400, "invalid-input", f"not a text turn: {exc.errors()[0]['msg']}") \
                from exc
        if len(asked.text) > self.settings.max_text_chars:
            raise Refused(413, "text-too-long", f"the text has {len(asked.text)} characters, "
                          f"over the limit of {self.settings.max_text_chars}")
        return asked

    async def text_turn(self, request: Request, device: str) -> Response:
        asked = await self._text_request(request)
        deadline = self._deadline(asked.deadline_s)
        self._rate(device)
        turn = await anyio.to_thread.run_sync(lambda: self.client.ask(
            asked.text, session=session_of(device, asked.session), device=device,
            speak=asked.speak, deadline_s=deadline))
        return created(turn)

    async def speak(self, request: Request, device: str) -> Response:
        """Text said as it is, on this device only (an announcement read aloud)."""
        asked = await self._text_request(request)
        deadline = self._deadline(asked.deadline_s)
        self._rate(device)
        turn = await anyio.to_thread.run_sync(lambda: self.client.speak(
            asked.text, device=device, session=session_of(device, asked.session),
            deadline_s=deadline))
        return created(turn)

    async def audio_turn(self, request: Request, device: str) -> Response:
        q = request.query_params
        session = q.get("session")
        session_of(device, session)  # refused early when malformed
        try:
            deadline = self._deadline(float(q["deadline_s"])) if "deadline_s" in q else None
            rate = int(q["rate"]) if "rate" in q else None
        except ValueError as exc:
            raise Refused(400, "invalid-input", f"bad query parameter: {exc}") from exc
        body = await read_body(request, self.settings.max_audio_bytes)
        self._rate(device)
        speak = q.get("speak", "true").lower() != "false"
        turn = await anyio.to_thread.run_sync(lambda: self.client.say(
            body, session=session_of(device, session), device=device, speak=speak,
            deadline_s=deadline, pcm_rate=rate))
        return created(turn)

    async def turn_events(self, request: Request, device: str) -> Response:
        turn_id = request.path_params["turn_id"]
        await anyio.to_thread.run_sync(self._own_turn, device, turn_id)
        after, wait_ms = _poll_params(request, default_after="0")
        entries = await read_after(self.aredis, self.client.keys.events(turn_id), after, wait_ms)
        return JSONResponse(entries.model_dump(mode="json"))

    async def cancel_turn(self, request: Request, device: str) -> Response:
        turn_id = request.path_params["turn_id"]
        spec = await anyio.to_thread.run_sync(self._own_turn, device, turn_id)
        cancelled = await anyio.to_thread.run_sync(lambda: Turn(self.client, spec).cancel(
            "cancelled by the device"))
        return JSONResponse({"v": 1, "turn_id": turn_id, "cancelled": cancelled},
                            status_code=202)

    async def announcements(self, request: Request, device: str) -> Response:
        stream = self.client.keys.announcements(device)
        after, wait_ms = _poll_params(request, default_after=None)
        if after is None:  # the first read starts after the newest entry
            newest: Any = await self.aredis.xrevrange(stream, count=1)
            after = newest[0][0].decode() if newest else "0-0"
        entries: Entries = await read_after(self.aredis, stream, after, wait_ms)
        return JSONResponse(entries.model_dump(mode="json"))


def create_app(settings: Settings) -> Starlette:
    """The gateway's ASGI application."""
    gw = Gateway(settings)

    async def health(request: Request) -> Response:
        try:
            ok = await gw.aredis.ping()
        except redis.RedisError:
            ok = False
        return JSONResponse({"v": 1, "ok": bool(ok)}, status_code=200 if ok else 503)

    routes = [
        Route("/v1/health", health),
        Route("/v1/turns", gw.guarded(gw.text_turn), methods=["POST"]),
        Route("/v1/turns/audio", gw.guarded(gw.audio_turn), methods=["POST"]),
        Route("/v1/speak", gw.guarded(gw.speak), methods=["POST"]),
        Route("/v1/turns/{turn_id:str}/events", gw.guarded(gw.turn_events)),
        Route("/v1/turns/{turn_id:str}/cancel", gw.guarded(gw.cancel_turn), methods=["POST"]),
        Route("/v1/announcements", gw.guarded(gw.announcements)),
        WebSocketRoute("/v1/turns/stream", lambda ws: stream_turn(gw, ws)),
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


def serve(settings: Settings, *, certfile: str | None = None, keyfile: str | None = None) -> None:
    """Run the gateway (uvicorn), with TLS when a certificate is given."""
    import uvicorn

    uvicorn.run(create_app(settings), host=settings.gateway_host, port=settings.gateway_port,
                ssl_certfile=certfile, ssl_keyfile=keyfile, log_level="info",
                proxy_headers=True, server_header=False)
