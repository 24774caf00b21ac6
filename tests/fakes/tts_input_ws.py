"""The fake ElevenLabs text-to-speech input streams, WebSockets:

- ``GET /v1/text-to-speech/{voice}/stream-input``, as the official SDK's
  ``text_to_speech.convert_realtime`` speaks it. Client messages (JSON): the first
  ``{"text": " ", "voice_settings"?, "generation_config"?: {"chunk_length_schedule": [...]},
  "xi_api_key"?}``; then ``{"text": "...", "flush"?, "try_trigger_generation"?}``;
  ``{"text": ""}`` ends the input. The server sends ``{"audio": base64 PCM, "isFinal": false,
  "normalizedAlignment": null, "alignment": null}`` per 100 ms of audio, then
  ``{"isFinal": true}``, and closes (1000).
- ``GET /v1/text-to-speech/{voice}/multi-stream-input``, the multi-context socket (the SDK has
  its message types, ``InitializeConnectionMulti``, ``SendTextMulti``, ``FlushContext``,
  ``CloseContext``, ``CloseSocket``, ``AudioOutputMulti``, ``FinalOutputMulti``, and no
  client). Each message names its ``context_id`` (none: the default context); a context opens
  with ``{"text": " ", ...}``, takes text (``flush`` to speak it now), ``{"text": ""}`` keeps it
  alive, ``{"close_context": true}`` speaks what is left and ends it with ``{"isFinal": true,
  "contextId": ...}``; ``{"close_socket": true}`` ends every context and closes (1000). Audio
  messages carry their ``contextId``; contexts are spoken at the same time, each at the voice's
  pace.

Text is buffered and spoken when the buffer reaches the schedule's next length, on ``flush``,
and at the end; each generation's audio follows ``tts_ttfb_s``, paced by ``tts_rtf`` (the
profile). A message that is not JSON, a first message (of a context) that is not ``" "``, text
for a context never opened, or no key (header ``xi-api-key``, or the first message's
``xi_api_key``) gets ``{"message": ..., "error": ..., "code": 1008}`` and a close with 1008.

Recorded per connection (route ``tts-input``): the query, the texts received and spoken (for the
multi-context socket, ``[context, text]`` pairs), the audio bytes sent.
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


class Refused(Exception):
    """A message the voice refuses: the socket closes with 1008."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


def stream_input_route(fake: FakeProviders, *, multi: bool = False) -> Any:
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
                                         status=int(fault["status"]),
                                         headers=fault.get("headers", {}))
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        stream = (MultiStream if multi else InputStream)(fake, ws, record, rate, key)
        await stream.run()
        return ws

    return handler


class Context:
    """One context's text, spoken in generations at the voice's pace."""

    def __init__(self, stream: _Socket, tag: dict[str, Any], config: dict[str, Any]) -> None:
        self.stream, self.tag = stream, tag
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
            self.stream.note_spoken(self.tag, text)
            self.generations.put_nowait(text)

    def end(self) -> None:
        """Speak what is left, then the final message."""
        self.generate()
        self.generations.put_nowait(None)
        self.stream.contexts = {k: v for k, v in self.stream.contexts.items() if v is not self}
        self.stream.ended.append(self)

    async def speak(self) -> None:
        from tests.fakes.provider_server import spoken_pcm

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
                                        **self.stream.audio_extra, "normalizedAlignment": None,
                                        "alignment": None, **self.tag})
                self.stream.note_audio(len(piece))
        await self.stream.send({"isFinal": True, **self.tag})


class _Socket:
    """What both sockets share: the connection, its key, its record."""

    audio_extra: dict[str, Any] = {}

    def __init__(self, fake: FakeProviders, ws: web.WebSocketResponse, record: dict[str, Any],
                 rate: int, key: str) -> None:
        self.fake, self.ws, self.record, self.rate, self.key = fake, ws, record, rate, key
        self.contexts: dict[str | None, Context] = {}  # the open ones
        self.ended: list[Context] = []

    async def run(self) -> None:
        try:
            done = await self.receive()
            if done:
                await asyncio.gather(*(c.speaker for c in self.ended))
        except Refused as refused:
            await self.send({"message": str(refused), "error": refused.error, "code": 1008})
            await self.ws.close(code=1008, message=refused.error.encode())
        finally:
            for context in [*self.contexts.values(), *self.ended]:
                context.speaker.cancel()
        if not self.ws.closed:
            await self.ws.close(code=1000)

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

    def note_spoken(self, tag: dict[str, Any], text: str) -> None:
        entry: Any = [tag["contextId"], text] if tag else text
        self.fake._note(self.record, spoken=[*self.record["spoken"], entry])

    def note_audio(self, n: int) -> None:
        self.fake._note(self.record, audio_bytes=self.record["audio_bytes"] + n)

    async def send(self, message: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps(message))

    async def receive(self) -> bool:
        raise NotImplementedError


class InputStream(_Socket):
    """``stream-input``: one text, one audio stream."""

    audio_extra = {"isFinal": False}

    async def receive(self) -> bool:
        """Read the client's messages; True once the input ended well."""
        context: Context | None = None
        async for data in self.messages():
            text = data.get("text")
            if not isinstance(text, str):
                raise Refused("invalid_message", "Each message has a text string.")
            if context is None:
                self.authenticate(data)
                if text != " ":
                    raise Refused("invalid_message",
                                  'The first message must have text " " (a space).')
                context = self.contexts[None] = Context(
                    self, {}, data.get("generation_config") or {})
                continue
            self.fake._note(self.record, texts=[*self.record["texts"], text])
            if text == "":
                context.end()
                return True
            context.add(text, bool(data.get("flush")))
        return False  # the client closed first


class MultiStream(_Socket):
    """``multi-stream-input``: contexts, each its own text and audio."""

    async def receive(self) -> bool:
        async for data in self.messages():
            if data.get("close_socket"):
                for context in list(self.contexts.values()):
                    context.end()
                return True
            name = data.get("context_id", data.get("contextId"))
            context = self.contexts.get(name)
            text = data.get("text")
            if data.get("close_context"):
                if context is not None:
                    context.end()
                continue
            if context is None:
                if text != " ":
                    raise Refused("invalid_message",
                                  f"Context {name!r} must be opened with text \" \" first.")
                self.authenticate(data)
                self.contexts[name] = Context(self, {"contextId": name or "default"},
                                              data.get("generation_config") or {})
                continue
            self.fake._note(self.record, texts=[*self.record["texts"], [name, text]])
            if text or data.get("flush"):
                context.add(text or "", bool(data.get("flush")))
        return False
