"""Streamed capture: a device sends its utterance as audio frames over a WebSocket while the
person speaks (``/v1/turns/stream``).

The device sends binary frames (16-bit mono PCM at ``?rate=``, 16 kHz by default), then a text
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
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from voxqueue.audio import SAMPLE_RATE, SAMPLE_WIDTH
from voxqueue.client import InputError, Turn, Unavailable
from voxqueue.gateway.access import bearer
from voxqueue.gateway.rules import Refused, rate_of, session_of
from voxqueue.speech_stream import SpeechStream

if TYPE_CHECKING:
    from voxqueue.gateway.app import Gateway

#: Seconds a capture may go without a frame before the gateway gives up on it.
IDLE_S = 10.0
#: WebSocket close codes: policy (unauthenticated), too big, and our own "refused".
POLICY, TOO_BIG, REFUSED = 1008, 1009, 4400


async def stream_turn(gw: Gateway, ws: WebSocket) -> None:
    """One utterance in frames, one turn out."""
    token = bearer(ws.headers.get("authorization", ""))
    device = await anyio.to_thread.run_sync(gw.devices.authenticate, token) if token else None
    if device is None or token is None:
        await ws.close(code=POLICY)  # before accepting: the handshake is refused (403)
        return
    await ws.accept()
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
