"""The fake ElevenLabs text-to-speech input stream, a WebSocket:
``GET /v1/text-to-speech/{voice}/stream-input``, as the official SDK's
``text_to_speech.convert_realtime`` speaks it. Client messages (JSON): the first
``{"text": " ", "voice_settings"?, "generation_config"?: {"chunk_length_schedule": [...]},
"xi_api_key"?}``; then ``{"text": "...", "flush"?, "try_trigger_generation"?}``;
``{"text": ""}`` ends the input. The server sends ``{"audio": base64 PCM, "isFinal": false,
"normalizedAlignment": null, "alignment": null}`` per 100 ms of audio, then
``{"isFinal": true}``, and closes (1000). voxqueue's own TLS WebSocket
(``voxqueue.tls_websocket``) is tested on it.

Text is buffered and spoken when the buffer reaches the schedule's next length, on ``flush``,
and at the end; each generation's audio follows ``tts_ttfb_s``, paced by ``tts_rtf`` (the
profile). A message that is not JSON, a first message that is not ``" "``, or no key (header
``xi-api-key``, or the first message's ``xi_api_key``) gets ``{"message": ..., "error": ...,
"code": 1008}`` and a close with 1008.

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
    from testkit.fakes.provider_server import FakeProviders

#: ElevenLabs' default ``chunk_length_schedule``: characters buffered before each generation.
DEFAULT_SCHEDULE = [120, 160, 250, 290]


class Refused(Exception):
    """A message the voice refuses: the socket closes with 1008."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


def stream_input_route(fake: FakeProviders) -> Any:
    from testkit.fakes.provider_server import PCM_RATES

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
                                         status=int(fault["status"]),
                                         headers=fault.get("headers", {}))
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        stream = InputStream(fake, ws, record, rate, key)
        await stream.run()
        return ws

    return handler


class Context:
    """The stream's text, spoken in generations at the voice's pace."""

    def __init__(self, stream: InputStream, config: dict[str, Any]) -> None:
        self.stream = stream
        self.buffer = ""
        self.schedule = list(config.get("chunk_length_schedule") or DEFAULT_SCHEDULE)
        self.generations: asyncio.Queue[str | None] = asyncio.Queue()
        self.speaker = asyncio.ensure_future(self.speak())

    def add(self, text: str, flush: bool) -> None:
        self.buffer += text
        if flush or len(self.buffer) >= self.schedule[0]:
            if len(self.schedule) > 1 and not flush:
                self.schedule.pop(0)
            self.generate()

    def generate(self) -> None:
        text, self.buffer = self.buffer.strip(), ""
        if text:
            self.stream.note_spoken(text)
            self.generations.put_nowait(text)

    def end(self) -> None:
        """Speak what is left, then the final message."""
        self.generate()
        self.generations.put_nowait(None)

    async def speak(self) -> None:
        from testkit.fakes.provider_server import spoken_pcm

        fake, rate, due = self.stream.fake, self.stream.rate, 0.0
        while (text := await self.generations.get()) is not None:
            prof = fake.profile
            await asyncio.sleep(prof["tts_ttfb_s"])
            pcm = spoken_pcm(text, rate)
            step = rate // 10 * 2  # 100 ms of 16-bit samples
            due = max(due, time.monotonic())
            for i in range(0, len(pcm), step):
                piece = pcm[i:i + step]
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                due += len(piece) / 2 / rate * prof["tts_rtf"]
                await self.stream.send({"audio": base64.b64encode(piece).decode(),
                                        "isFinal": False, "normalizedAlignment": None,
                                        "alignment": None})
                self.stream.note_audio(len(piece))
        await self.stream.send({"isFinal": True})


class InputStream:
    """``stream-input``: one text, one audio stream; the connection, its key, its record."""

    def __init__(self, fake: FakeProviders, ws: web.WebSocketResponse, record: dict[str, Any],
                 rate: int, key: str) -> None:
        self.fake, self.ws, self.record, self.rate, self.key = fake, ws, record, rate, key
        self.context: Context | None = None

    async def run(self) -> None:
        try:
            if await self.receive() and self.context is not None:
                await self.context.speaker
        except Refused as refused:
            await self.send({"message": str(refused), "error": refused.error, "code": 1008})
            await self.ws.close(code=1008, message=refused.error.encode())
        finally:
            if self.context is not None:
                self.context.speaker.cancel()
        if not self.ws.closed:
            await self.ws.close(code=1000)

    async def receive(self) -> bool:
        """Read the client's messages; True once the input ended well."""
        async for data in self.messages():
            text = data.get("text")
            if not isinstance(text, str):
                raise Refused("invalid_message", "Each message has a text string.")
            if self.context is None:
                self.authenticate(data)
                if text != " ":
                    raise Refused("invalid_message",
                                  'The first message must have text " " (a space).')
                self.context = Context(self, data.get("generation_config") or {})
                continue
            self.fake._note(self.record, texts=[*self.record["texts"], text])
            if text == "":
                self.context.end()
                return True
            self.context.add(text, bool(data.get("flush")))
        return False  # the client closed first

    async def messages(self) -> Any:
        async for msg in self.ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                data = json.loads(msg.data)
                if not isinstance(data, dict) or not isinstance(data.get("text", ""), str | None):
                    raise TypeError
            except (ValueError, TypeError):
                raise Refused("invalid_message", "Each message is a JSON object.") from None
            yield data

    def authenticate(self, data: dict[str, Any]) -> None:
        self.key = self.key or str(data.get("xi_api_key") or "").strip()
        if not self.key:
            raise Refused("auth_error", "No API key was given.")
        with self.fake._lock:
            self.fake._seen_keys.add(self.key)

    def note_spoken(self, text: str) -> None:
        self.fake._note(self.record, spoken=[*self.record["spoken"], text])

    def note_audio(self, n: int) -> None:
        self.fake._note(self.record, audio_bytes=self.record["audio_bytes"] + n)

    async def send(self, message: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps(message))
