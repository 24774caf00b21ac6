"""The fake ElevenLabs text-to-speech input stream (``GET /v1/text-to-speech/{voice}/stream-input``,
a WebSocket), as the official SDK's ``text_to_speech.convert_realtime`` speaks it.

Client messages (JSON): the first ``{"text": " ", "voice_settings"?, "generation_config"?:
{"chunk_length_schedule": [...]}, "xi_api_key"?}``; then ``{"text": "...", "flush"?,
"try_trigger_generation"?}``; ``{"text": ""}`` ends the input. Text is buffered and spoken
when the buffer reaches the schedule's next length, on ``flush``, and at the end of the input;
the server sends ``{"audio": base64 PCM, "isFinal": false, "normalizedAlignment": null,
"alignment": null}`` per 100 ms of audio, paced by the profile (``tts_ttfb_s`` before each
generation's first audio, ``tts_rtf``), then ``{"isFinal": true}`` and closes (1000). A first
message that is not ``{"text": " "...}``, or a message that is not JSON, gets
``{"message": ..., "error": ..., "code": 1008}`` and a close with 1008, as does a first message
with no key where the upgrade had none (header ``xi-api-key``, or the message's ``xi_api_key``).

Recorded per connection (route ``tts-input``): the query, the texts received and spoken, the
audio bytes sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from tests.fakes.provider_server import FakeProviders

#: ElevenLabs' default ``chunk_length_schedule``: characters buffered before each generation.
DEFAULT_SCHEDULE = [120, 160, 250, 290]


def stream_input_route(fake: FakeProviders) -> Any:
    from tests.fakes.provider_server import PCM_RATES

    async def handler(request: web.Request) -> web.StreamResponse:
        key = request.headers.get("xi-api-key", "").strip()
        record: dict[str, Any] = {"route": "tts-input", "path": request.path, "ts": time.time(),
                                  "query": dict(request.query), "texts": [], "spoken": [],
                                  "audio_bytes": 0}
        with fake._lock:
            fake._requests.append(record)
            fake._seen_keys.update([key] if key else [])
        rate = PCM_RATES.get(request.query.get("output_format", ""))
        if rate is None:
            return web.json_response({"detail": {"status": "invalid_output_format", "message":
                                      f"output_format must be one of {sorted(PCM_RATES)}"}},
                                     status=422)
        if fault := fake._next_fault("tts-input"):
            fake._note(record, fault=fault)
            if "status" in fault:
                return web.json_response({"detail": {"message": "Injected fault"}},
                                         status=int(fault["status"]))
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await InputStream(fake, ws, record, rate, key).run()
        return ws

    return handler


class InputStream:
    def __init__(self, fake: FakeProviders, ws: web.WebSocketResponse, record: dict[str, Any],
                 rate: int, key: str) -> None:
        self.fake, self.ws, self.record, self.rate, self.key = fake, ws, record, rate, key
        self.buffer = ""
        self.schedule = list(DEFAULT_SCHEDULE)
        self.generations: asyncio.Queue[str | None] = asyncio.Queue()
        self.due = 0.0  # when the next audio may go out (the voice's pace)

    async def run(self) -> None:
        speaker = asyncio.ensure_future(self.speak())
        try:
            if await self.receive():
                await speaker
        finally:
            speaker.cancel()
        if not self.ws.closed:
            await self.ws.close(code=1000)

    async def receive(self) -> bool:
        """Read the client's messages; True once the input ended well."""
        first = True
        async for msg in self.ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                data = json.loads(msg.data)
                text = data["text"]
                if not isinstance(text, str):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                await self.refuse("invalid_message", "Each message is JSON with a text string.")
                return False
            if first:
                first = False
                self.key = self.key or str(data.get("xi_api_key") or "").strip()
                if not self.key:
                    await self.refuse("auth_error", "No API key was given.")
                    return False
                with self.fake._lock:
                    self.fake._seen_keys.add(self.key)
                if text != " ":
                    await self.refuse("invalid_message",
                                      'The first message must have text " " (a space).')
                    return False
                config = data.get("generation_config") or {}
                self.schedule = list(config.get("chunk_length_schedule") or DEFAULT_SCHEDULE)
                continue
            self.fake._note(self.record, texts=[*self.record["texts"], text])
            if text == "":
                self.generate()
                await self.generations.put(None)
                return True
            self.buffer += text
            limit = self.schedule[0]
            if data.get("flush") or len(self.buffer) >= limit:
                if len(self.schedule) > 1 and not data.get("flush"):
                    self.schedule.pop(0)
                self.generate()
        return False  # the client closed first

    def generate(self) -> None:
        text, self.buffer = self.buffer.strip(), ""
        if text:
            self.fake._note(self.record, spoken=[*self.record["spoken"], text])
            self.generations.put_nowait(text)

    async def speak(self) -> None:
        from tests.fakes.provider_server import tone_pcm

        while (text := await self.generations.get()) is not None:
            prof = self.fake.profile
            await asyncio.sleep(prof["tts_ttfb_s"])
            pcm = tone_pcm(max(0.2, 0.06 * len(text)), self.rate)
            step = self.rate // 10 * 2  # 100 ms of 16-bit samples
            self.due = max(self.due, time.monotonic())
            for i in range(0, len(pcm), step):
                piece = pcm[i:i + step]
                if (wait := self.due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                self.due += len(piece) / 2 / self.rate * prof["tts_rtf"]
                await self.send({"audio": base64.b64encode(piece).decode(), "isFinal": False,
                                 "normalizedAlignment": None, "alignment": None})
                self.fake._note(self.record,
                                audio_bytes=self.record["audio_bytes"] + len(piece))
        await self.send({"isFinal": True})

    async def send(self, message: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps(message))

    async def refuse(self, error: str, message: str) -> None:
        await self.send({"message": message, "error": error, "code": 1008})
        await self.ws.close(code=1008, message=error.encode())
