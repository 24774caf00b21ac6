"""The fake OpenAI Realtime transcription endpoint (``GET /v1/realtime?intent=transcription``,
a WebSocket), for the official SDK's ``client.realtime.connect``.

Client events: ``session.update`` (``session.type == "transcription"``, input ``audio/pcm`` at
24 kHz), ``input_audio_buffer.append`` (base64 PCM), ``input_audio_buffer.commit``,
``input_audio_buffer.clear``. Server events: ``session.created``/``session.updated``,
``input_audio_buffer.committed`` (an item per commit), then after the profile's
``stt_delay_s`` (the same model time as an upload) ``…input_audio_transcription.delta`` and
``…completed``; ``error`` for an empty commit or an unknown event.

What the fake hears: the first commit of a session that holds sound gets the next scripted
transcript (or the default), later commits get "": a command is one sentence.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from testkit.fakes.provider_server import FakeProviders

RATE = 24000
SOUND_RMS = 200.0  # int16 units: quieter than this is silence to the fake


def realtime_route(fake: FakeProviders) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        record: dict[str, Any] = {"route": "realtime", "path": request.path, "ts": time.time(),
                                  "query": dict(request.query), "auth_present": bool(key),
                                  "events": [], "audio_bytes": 0, "commits": 0}
        with fake._lock:
            fake._requests.append(record)
            fake._seen_keys.update([key] if key else [])
        if not key:
            return web.json_response({"error": {"message": "Incorrect API key provided",
                                                "code": "invalid_api_key"}}, status=401)
        if fault := fake._next_fault("realtime"):
            fake._note(record, fault=fault)
            if "status" in fault:
                return web.json_response({"error": {"message": "Injected fault"}},
                                         status=int(fault["status"]))
        if request.query.get("intent") != "transcription":
            return web.json_response({"error": {"message": "intent=transcription expected"}},
                                     status=400)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await Session(fake, ws, record).run()
        return ws

    return handler


class Session:
    def __init__(self, fake: FakeProviders, ws: web.WebSocketResponse,
                 record: dict[str, Any]) -> None:
        self.fake, self.ws, self.record = fake, ws, record
        self.buffer = bytearray()
        self.heard_sound = False
        self.previous: str | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.session: dict[str, Any] = {"type": "transcription", "id": f"sess_{uuid.uuid4().hex}"}

    async def send(self, event: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps({"event_id": f"event_{uuid.uuid4().hex}",
                                               **event}))

    async def run(self) -> None:
        await self.send({"type": "session.created", "session": self.session})
        async for msg in self.ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                event = json.loads(msg.data)
            except ValueError:
                await self.error("invalid_json", "The event is not JSON.")
                continue
            kind = event.get("type")
            self.fake._note(self.record, events=[*self.record["events"], kind])
            if kind == "session.update":
                self.session |= event.get("session") or {}
                await self.send({"type": "session.updated", "session": self.session})
            elif kind == "input_audio_buffer.append":
                data = base64.b64decode(event.get("audio", ""))
                self.buffer += data
                self.fake._note(self.record,
                                audio_bytes=self.record["audio_bytes"] + len(data))
            elif kind == "input_audio_buffer.clear":
                self.buffer.clear()
                await self.send({"type": "input_audio_buffer.cleared"})
            elif kind == "input_audio_buffer.commit":
                await self.commit()
            else:
                await self.error("unknown_event", f"Unknown event type {kind!r}.")
        for task in self.tasks:
            task.cancel()

    async def commit(self) -> None:
        if len(self.buffer) < RATE * 2 // 10:  # under 100 ms, as the real service refuses
            await self.error("input_audio_buffer_commit_empty",
                             "buffer too small: at least 100ms of audio is needed")
            return
        item, pcm = f"item_{uuid.uuid4().hex}", bytes(self.buffer)
        self.buffer.clear()
        self.fake._note(self.record, commits=self.record["commits"] + 1)
        await self.send({"type": "input_audio_buffer.committed", "item_id": item,
                         "previous_item_id": self.previous})
        self.previous = item
        samples = np.frombuffer(pcm[:len(pcm) // 2 * 2], dtype="<i2").astype(np.float64)
        sound = bool(samples.size) and float(np.sqrt(np.mean(samples ** 2))) > SOUND_RMS
        text = ""
        if sound and not self.heard_sound:
            self.heard_sound = True
            text = self.fake._pick_transcript("")
        task = asyncio.ensure_future(self.transcribe(item, text))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def transcribe(self, item: str, text: str) -> None:
        if delay := self.fake.profile["stt_delay_s"]:
            await asyncio.sleep(delay)
        base = {"item_id": item, "content_index": 0}
        if text:
            await self.send({"type": "conversation.item.input_audio_transcription.delta",
                             **base, "delta": text})
        await self.send({"type": "conversation.item.input_audio_transcription.completed",
                         **base, "transcript": text,
                         "usage": {"type": "duration", "seconds": 1}})

    async def error(self, code: str, message: str) -> None:
        await self.send({"type": "error", "error": {"type": "invalid_request_error",
                                                    "code": code, "message": message}})
