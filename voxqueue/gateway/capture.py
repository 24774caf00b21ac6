"""Streamed capture: a device sends its utterance as audio frames over a WebSocket while the
person speaks (``/v1/turns/stream``), and the turn starts the moment it says the utterance ended.

The device sends binary frames (16-bit mono PCM at ``?rate=``, 16 kHz by default), then a text
frame ``{"type": "end"}`` (or ``{"type": "cancel"}`` to drop it). The gateway answers with one
text frame: ``{"type": "turn", "turn_id", "session_id", "deadline"}``, or ``{"type": "error",
"code", "message"}``, and closes; the device then follows the turn like any other. The server's
limits hold while the frames arrive: the size is checked at every frame, an idle socket is
closed after ``IDLE_S``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from voxqueue.client import InputError, Unavailable
from voxqueue.gateway.rules import Refused, session_of

if TYPE_CHECKING:
    from voxqueue.gateway.app import Gateway

#: Seconds a capture may go without a frame before the gateway gives up on it.
IDLE_S = 10.0
#: WebSocket close codes: policy (unauthenticated), too big, and our own "refused".
POLICY, TOO_BIG, REFUSED = 1008, 1009, 4400


async def stream_turn(gw: Gateway, ws: WebSocket) -> None:
    """One utterance in frames, one turn out."""
    token = ws.headers.get("authorization", "").partition(" ")[2].strip()
    device = await anyio.to_thread.run_sync(gw.devices.authenticate, token) if token else None
    if device is None:
        await ws.close(code=POLICY)  # before accepting: the handshake is refused (403)
        return
    await ws.accept()
    q = ws.query_params
    try:
        rate = int(q.get("rate", "16000"))
        deadline = gw._deadline(float(q["deadline_s"])) if "deadline_s" in q else None
        session = q.get("session")
        pcm = await _frames(ws, gw.settings.max_audio_bytes)
        if pcm is None:
            await ws.close()
            return
        gw._rate(device)
        turn = await anyio.to_thread.run_sync(lambda: gw.client.say(
            pcm, session=session_of(device, session), device=device, pcm_rate=rate,
            speak=q.get("speak", "true").lower() != "false", deadline_s=deadline))
    except Refused as exc:
        await _refuse(ws, exc.code, exc.message, TOO_BIG if exc.status == 413 else REFUSED)
        return
    except (InputError, ValueError) as exc:
        await _refuse(ws, getattr(exc, "code", "invalid-input"), str(exc), REFUSED)
        return
    except Unavailable as exc:
        await _refuse(ws, "unavailable", str(exc), 1011)
        return
    except TimeoutError:
        await _refuse(ws, "idle", f"no audio frame for {IDLE_S:g} s", REFUSED)
        return
    except WebSocketDisconnect:
        return  # the device went away mid-utterance: nothing was started
    await ws.send_text(json.dumps({"v": 1, "type": "turn", "turn_id": turn.turn_id,
                                   "session_id": turn.session_id,
                                   "deadline": turn.spec.deadline}))
    await ws.close()


async def _frames(ws: WebSocket, limit: int) -> bytes | None:
    """The utterance's PCM, or None when the device cancelled it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        with anyio.fail_after(IDLE_S):
            message: Any = await ws.receive()
        if message.get("type") == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        if message.get("bytes") is not None:
            size += len(message["bytes"])
            if size > limit:
                raise Refused(413, "too-large", f"the audio is over the limit of {limit} bytes")
            chunks.append(message["bytes"])
            continue
        control = json.loads(message.get("text") or "{}")
        if control.get("type") == "end":
            return b"".join(chunks)
        if control.get("type") == "cancel":
            return None
        raise Refused(400, "invalid-input", f"unknown message {str(control)[:60]!r}")


async def _refuse(ws: WebSocket, code: str, message: str, close_code: int) -> None:
    await ws.send_text(json.dumps({"v": 1, "type": "error", "code": code, "message": message}))
    await ws.close(code=close_code)
