"""A fake OpenAI + ElevenLabs HTTP server for tests and benchmarks.

OpenAI's chat completions and its Responses API (``testkit.fakes.responses_wire``) answer the
same ``script_chat`` scripts.

The official SDKs work against it (``openai.OpenAI(base_url=fake.openai_base_url)``,
``elevenlabs.ElevenLabs(base_url=fake.elevenlabs_base_url)``). All state lives in the
server, so workers in other processes see the same scripts; the object API is mirrored by
``/_fake/*`` admin routes for out-of-process users.

In-process::

    with FakeProviders() as fake:
        fake.script_chat({"tool_calls": [{"name": "get_current_time", "arguments": {}}]})
        ...

Out of process: ``python -m testkit.fakes.provider_server --port 0 [--profile JSON]`` prints
``READY http://127.0.0.1:PORT`` once listening; drive it with :class:`FakeProvidersClient`
(or :func:`spawn`, which does both).

The Realtime transcription WebSocket (``/v1/realtime``) is in ``testkit.fakes.realtime_ws``, the
text-to-speech input stream (``/v1/text-to-speech/{voice}/stream-input``) in
``testkit.fakes.tts_input_ws``.

Faults (``inject(route, **fault)``, route "chat" | "responses" | "transcriptions" | "tts" |
"tts-input" | "realtime"), a FIFO
per route, one consumed per authenticated, well-formed request; ``times=N`` keeps it for N:
``delay=s`` sleeps first; ``reset=True`` drops the connection without a response;
``status=429|500|503`` (+ ``headers={"retry-after-ms": "200"}``, ``message``) answers an
error; ``cut_after_chunks=N`` drops a streamed chat / Responses / TTS answer after N chunks
(events);
``malformed_after_chunks=N`` puts a well-framed but malformed chunk after N chat chunks.

Answers that differ per call: a scripted chat response with ``variants`` (a list of contents)
answers each call with the next of them, as a sampled model words each answer differently;
``vary_voice()`` makes each TTS request's audio a new rendition of its text (same length,
different bytes: ``spoken_pcm(text, rendition=n)``, noted as ``rendition`` in the request),
as a voice with noise, or ElevenLabs, never says a sentence the same way twice.

Latency profile (``set_profile``): stt_delay_s, llm_ttft_s, llm_tokens_per_s (0 = unpaced),
tts_ttfb_s, tts_rtf (0 = as fast as possible). All default to 0.

Text to speech over HTTP: ``/v1/text-to-speech/{voice}/stream`` answers raw PCM,
``.../stream/with-timestamps`` (Pipecat's ``ElevenLabsHttpTTSService``) a JSON line per chunk
(``audio_base64``, null alignments). Each request is recorded with ``ts`` (its arrival) and,
for a streamed chat or TTS answer, ``sent_ts`` (when each chunk was written), epoch seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import hashlib
import io
import json
import math
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import wave
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from aiohttp import web

from testkit.fakes import responses_wire
from testkit.fakes.realtime_ws import realtime_route
from testkit.fakes.threads import serve_in_thread
from testkit.fakes.tts_input_ws import stream_input_route

ROUTES = ("chat", "responses", "transcriptions", "tts", "tts-input", "realtime")
PROFILE_KEYS = ("stt_delay_s", "llm_ttft_s", "llm_tokens_per_s", "tts_ttfb_s", "tts_rtf")
FAULT_KEYS = {
    "status", "headers", "times", "reset", "delay", "cut_after_chunks", "malformed_after_chunks",
    "message",
}
PCM_RATES = {"pcm_16000": 16000, "pcm_22050": 22050, "pcm_24000": 24000}
DEFAULT_TRANSCRIPT = "what time is it"
ARG_FRAGMENT = 7  # chars per streamed tool-call argument fragment
FILE_KEY = web.RequestKey("file", bytes)

Json = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = Callable[[web.Request, Json], Awaitable[web.StreamResponse]]


class _Abort(Exception):
    """Raised after the connection was deliberately dropped."""


def _openai_error(status: int, message: str, code: str | None = None) -> web.Response:
    kind = {401: "invalid_request_error", 429: "requests"}.get(status)
    kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _eleven_error(status: int, message: str, code: str | None = None) -> web.Response:
    return web.json_response(
        {"detail": {"status": code or "error", "message": message}}, status=status
    )


def _abort(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
    raise _Abort


def _text_of(content: Any) -> str:
    """Text of a message content: a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def streamed_words(text: str) -> list[str]:
    """Word-sized pieces whose concatenation is exactly ``text``: the fake model's tokens."""
    pieces = re.findall(r"\s*\S+", text)
    tail = text[len("".join(pieces)) :]
    return [*pieces, tail] if tail else pieces


def _wav_seconds(data: bytes) -> float:
    try:
        with wave.open(io.BytesIO(data)) as w:
            return float(w.getnframes()) / float(w.getframerate())
    except (wave.Error, EOFError, ZeroDivisionError):
        return max(len(data) - 44, 0) / 32000.0


def _tool_call(spec: Json) -> Json:
    """A scripted {"name", "arguments": dict | raw str, "id"?} as an OpenAI tool call."""
    args = spec.get("arguments", {})
    fn = {"name": spec["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}
    return {
        "id": spec.get("id") or f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": fn,
    }


def tone_pcm(seconds: float, rate: int, freq: float = 440.0, amplitude: float = 0.1) -> bytes:
    """A quiet sine tone as 16-bit little-endian mono PCM."""
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq * t) * amplitude * 32767).astype("<i2").tobytes()


def spoken_pcm(text: str, rate: int = 16000, rendition: int | None = None) -> bytes:
    """What the fake voice says for ``text``: 60 ms of tone per character, at least 0.2 s. The
    ``rendition``-th of a voice that varies (``vary_voice``) has noise of its own on it."""
    pcm = tone_pcm(max(0.2, 0.06 * len(text)), rate)
    if rendition is None:
        return pcm
    seed = int.from_bytes(hashlib.sha256(f"{rendition}:{text}".encode()).digest()[:8], "little")
    noise = np.random.default_rng(seed).integers(-300, 301, len(pcm) // 2)
    samples = np.frombuffer(pcm, "<i2").astype(np.int32) + noise
    return np.clip(samples, -32768, 32767).astype("<i2").tobytes()


class _Queries:
    """Helpers over ``requests``, shared by the in-process server and the HTTP client."""

    @property
    def requests(self) -> list[Json]:
        raise NotImplementedError

    def requests_for(self, route: str) -> list[Json]:
        return [r for r in self.requests if r["route"] == route]

    def chat_requests(self) -> list[Json]:
        """The JSON bodies of the chat-completion requests, in arrival order."""
        return [r["json"] for r in self.requests_for("chat")]

    def responses_requests(self) -> list[Json]:
        """The JSON bodies of the Responses API requests, in arrival order."""
        return [r["json"] for r in self.requests_for("responses")]

    def wait_for_requests(self, route: str, count: int, timeout: float = 10.0) -> list[Json]:
        """Block until ``count`` requests hit ``route``; return them (TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while len(found := self.requests_for(route)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(found)}/{count} {route} requests after {timeout}s")
            time.sleep(0.02)
        return found


class FakeProviders(_Queries):
    """Fake OpenAI (transcriptions, chat completions) and ElevenLabs (TTS) server."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, profile: dict[str, float] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context``: serve HTTPS (and WSS) with it, as the SDKs' WebSocket helpers
        connect only to ``wss://`` addresses."""
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._inflight: dict[str, int] = dict.fromkeys(ROUTES, 0)
        self.reset()
        if profile:
            self.set_profile(**profile)

    # ------------------------------------------------------------------ object API

    def reset(self) -> None:
        """Clear scripts, faults, profile, recorded requests, keys and concurrency stats."""
        with self._lock:
            self._chat: list[Json] = []
            self._transcripts: list[Json] = []
            self._faults: dict[str, deque[list[Any]]] = {r: deque() for r in ROUTES}
            self._profile: dict[str, float] = dict.fromkeys(PROFILE_KEYS, 0.0)
            self._requests: list[Json] = []
            self._seen_keys: set[str] = set()
            self._max_concurrency: dict[str, int] = dict.fromkeys(ROUTES, 0)
            self._renditions: dict[str, int] | None = None  # text -> renditions made
            self.default_transcript = DEFAULT_TRANSCRIPT

    def script_transcripts(self, *items: str | Json) -> None:
        """Queue transcripts: "text", or {"text", "match_sha256"?: hex, "repeat"?: bool}."""
        parsed = [{"text": i} if isinstance(i, str) else dict(i) for i in items]
        for item in parsed:
            if not isinstance(item.get("text"), str):
                raise ValueError(f"a scripted transcript needs a 'text' string: {item!r}")
        with self._lock:
            self._transcripts.extend(parsed)

    def script_chat(self, *responses: Json) -> None:
        """Queue chat responses: {"content"?, "variants"?, "tool_calls"?, "match"?, "after_tool"?,
        "repeat"?, "reasoning"?}; ``variants``: the contents of successive answers, in turn;
        ``reasoning``: a reasoning item's summary (the Responses API only)."""
        for resp in responses:
            if not isinstance(resp, dict) or not (
                    "content" in resp or "tool_calls" in resp or resp.get("variants")):
                raise ValueError(f"a scripted chat response needs content or tool_calls: {resp!r}")
            for call in resp.get("tool_calls", []):
                if "name" not in call:
                    raise ValueError(f"a scripted tool call needs a name: {call!r}")
        with self._lock:
            self._chat.extend(copy.deepcopy(list(responses)))

    def vary_voice(self, varies: bool = True) -> None:
        """Make each TTS request's audio the next rendition of its text (until ``reset``)."""
        with self._lock:
            self._renditions = {} if varies else None

    def inject(self, route: str, **fault: Any) -> None:
        """Queue a fault for "chat", "transcriptions" or "tts" (see module docs)."""
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}, expected one of {ROUTES}")
        if unknown := set(fault) - FAULT_KEYS:
            raise ValueError(f"unknown fault keys {sorted(unknown)}")
        with self._lock:
            self._faults[route].append([dict(fault), int(fault.get("times", 1))])

    def set_profile(self, **fields: float) -> None:
        """Update latency-profile fields (others keep their value; reset() zeroes them)."""
        if unknown := set(fields) - set(PROFILE_KEYS):
            raise ValueError(f"unknown profile keys {sorted(unknown)}")
        with self._lock:
            self._profile.update({k: float(v) for k, v in fields.items()})

    @property
    def profile(self) -> dict[str, float]:
        with self._lock:
            return dict(self._profile)

    @property
    def requests(self) -> list[Json]:
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def seen_keys(self) -> set[str]:
        with self._lock:
            return set(self._seen_keys)

    @property
    def max_concurrency(self) -> dict[str, int]:
        with self._lock:
            return dict(self._max_concurrency)

    def state(self) -> Json:
        with self._lock:
            return {
                "requests": copy.deepcopy(self._requests),
                "seen_keys": sorted(self._seen_keys),
                "max_concurrency": dict(self._max_concurrency),
                "profile": dict(self._profile),
            }

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def elevenlabs_base_url(self) -> str:
        return self.url

    async def start_async(self) -> None:
        """Start listening on the current event loop (sets ``self.port``)."""
        self._runner = web.AppRunner(self.make_app(), shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port,
                          ssl_context=self.ssl_context).start()
        self.port = self._runner.addresses[0][1]

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> FakeProviders:
        """Serve from a background thread with its own event loop."""
        self._loop, self._thread = serve_in_thread(self.start_async, "fake-providers")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> FakeProviders:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ app

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._provider("transcriptions", self._stt))
        app.router.add_post("/v1/chat/completions", self._provider("chat", self._chat_route))
        app.router.add_post("/v1/responses", self._provider("responses", self._responses_route))
        app.router.add_get("/v1/realtime", realtime_route(self))
        app.router.add_get("/v1/text-to-speech/{voice_id}/stream-input", stream_input_route(self))
        app.router.add_post("/v1/text-to-speech/{voice_id}", self._provider("tts", self._tts))
        app.router.add_post(
            "/v1/text-to-speech/{voice_id}/stream", self._provider("tts", self._tts)
        )
        app.router.add_post(
            "/v1/text-to-speech/{voice_id}/stream/with-timestamps",
            self._provider("tts", self._tts_with_timestamps),
        )
        admin: dict[str, Callable[[Any], None]] = {
            "reset": lambda _: self.reset(),
            "chat": lambda b: self.script_chat(*(b if isinstance(b, list) else [b])),
            "transcripts": self._admin_transcripts,
            "faults": self._admin_faults,
            "profile": lambda b: self.set_profile(**b),
            "voice": lambda b: self.vary_voice(bool(b.get("varies", True))),
        }
        for name, action in admin.items():
            app.router.add_post(f"/_fake/{name}", self._admin(action))
        app.router.add_get("/_fake/requests", self._json_state)
        return app

    async def _json_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    def _admin_faults(self, body: Any) -> None:
        for fault in body if isinstance(body, list) else [body]:
            self.inject(**fault)

    def _admin_transcripts(self, body: Any) -> None:
        if isinstance(body, dict) and ("transcripts" in body or "default_transcript" in body):
            self.script_transcripts(*body.get("transcripts", []))
            if "default_transcript" in body:
                self.default_transcript = body["default_transcript"]
        else:
            self.script_transcripts(*(body if isinstance(body, list) else [body]))

    def _admin(self, action: Callable[[Any], None]) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            try:
                action(await request.json() if request.can_read_body else None)
            except (TypeError, ValueError) as exc:
                return web.json_response({"ok": False, "error": str(exc)}, status=400)
            return web.json_response({"ok": True})

        return handler

    def _provider(self, route: str, handle: Route) -> Handler:
        """Wrap a provider route: record, count concurrency, check auth and input, apply faults."""
        error = _eleven_error if route == "tts" else _openai_error

        async def handler(request: web.Request) -> web.StreamResponse:
            if route == "tts":
                key = request.headers.get("xi-api-key", "").strip()
            else:
                auth = request.headers.get("Authorization", "")
                key = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            record: Json = {"route": route, "path": request.path, "ts": time.time()}
            record |= {"query": dict(request.query), "auth_present": bool(key)}
            record["retry_count"] = request.headers.get("x-stainless-retry-count")
            with self._lock:
                self._inflight[route] += 1
                peak = max(self._max_concurrency[route], self._inflight[route])
                self._max_concurrency[route] = peak
            resp: web.StreamResponse
            try:
                record.update(await self._read_body(request, route))
                with self._lock:
                    self._requests.append(record)
                    self._seen_keys.update([key] if key else [])
                if not key:
                    resp = error(401, "Incorrect API key provided", "invalid_api_key")
                elif "invalid" in record:
                    resp = error(*record["invalid"])
                elif fault := self._next_fault(route):
                    self._note(record, fault=fault)
                    await asyncio.sleep(float(fault.get("delay", 0)))
                    if fault.get("reset"):
                        _abort(request)
                    if "status" in fault:
                        resp = error(int(fault["status"]), fault.get("message", "Injected fault"))
                        resp.headers.update(fault.get("headers", {}))
                    else:
                        resp = await handle(request, record)
                else:
                    resp = await handle(request, record)
                self._note(record, status=resp.status)
                return resp
            except _Abort:
                self._note(record, status="aborted")
                raise asyncio.CancelledError from None
            finally:
                with self._lock:
                    self._inflight[route] -= 1

        return handler

    def _note(self, record: Json, **fields: Any) -> None:
        with self._lock:
            record.update(fields)

    def _next_fault(self, route: str) -> Json:
        with self._lock:
            queue = self._faults[route]
            if not queue:
                return {}
            fault, left = queue[0]
            if left > 1:
                queue[0][1] = left - 1
            else:
                queue.popleft()
            return dict(fault)

    async def _read_body(self, request: web.Request, route: str) -> Json:
        """Parse the body into the record; ``invalid`` holds (status, message) on bad input."""
        if route == "transcriptions":
            try:
                form = await request.post()
            except ValueError as exc:
                return {"form": {}, "file_size": 0, "invalid": (400, f"Bad multipart body: {exc}")}
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
            upload = form.get("file")
            data = upload.file.read() if isinstance(upload, web.FileField) else b""
            request[FILE_KEY] = data
            rec: Json = {"form": fields, "file_size": len(data)}
            rec["file_sha256"] = hashlib.sha256(data).hexdigest()
            if not isinstance(upload, web.FileField):
                rec["invalid"] = (400, "Missing required parameter: 'file'.")
            elif not data or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
                rec["invalid"] = (400, "Invalid file format. Expected a RIFF/WAVE file.")
            elif not fields.get("model"):
                rec["invalid"] = (400, "Missing required parameter: 'model'.")
            return rec
        try:
            body = await request.json()
        except ValueError:
            return {"json": None, "invalid": (400, "Request body is not valid JSON.")}
        if not isinstance(body, dict):
            return {"json": body, "invalid": (400, "Request body must be a JSON object.")}
        if route == "chat" and not (body.get("model") and isinstance(body.get("messages"), list)):
            return {"json": body, "invalid": (400, "'model' and 'messages' are required.")}
        if route == "responses" and (why := responses_wire.invalid(body)):
            return {"json": body, "invalid": (400, why)}
        if route == "tts":
            if request.query.get("output_format") not in PCM_RATES:
                msg = f"output_format must be one of {sorted(PCM_RATES)} (the fake speaks PCM only)"
                return {"json": body, "invalid": (422, msg)}
            if not str(body.get("text") or "").strip():
                return {"json": body, "invalid": (422, "text must not be empty")}
        return {"json": body}

    # ------------------------------------------------------------------ transcriptions

    async def _stt(self, request: web.Request, record: Json) -> web.Response:
        data: bytes = request[FILE_KEY]
        text = self._pick_transcript(record["file_sha256"])
        if delay := self.profile["stt_delay_s"]:
            await asyncio.sleep(delay)
        fmt = record["form"].get("response_format", "json")
        seconds = _wav_seconds(data)
        if fmt == "text":
            return web.Response(text=text, content_type="text/plain")
        if fmt == "json":
            usage = {"type": "duration", "seconds": math.ceil(seconds)}
            return web.json_response({"text": text, "usage": usage})
        if fmt == "verbose_json":
            lang = record["form"].get("language", "english")
            body = {"task": "transcribe", "language": lang, "duration": seconds, "text": text}
            return web.json_response({**body, "segments": []})
        return _openai_error(400, f"Unsupported response_format {fmt!r} in the fake.")

    def _pick_transcript(self, sha256: str) -> str:
        with self._lock:
            for i, item in enumerate(self._transcripts):
                if item.get("match_sha256") in (None, sha256):
                    if not item.get("repeat"):
                        del self._transcripts[i]
                    return str(item["text"])
            return self.default_transcript

    # ------------------------------------------------------------------ chat

    def _pick_chat(self, messages: list[Json]) -> Json:
        last = messages[-1] if messages else {}
        user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        user_text = _text_of(user.get("content"))
        with self._lock:
            for i, resp in enumerate(self._chat):
                if resp.get("after_tool") and last.get("role") != "tool":
                    continue
                if "match" in resp and str(resp["match"]).lower() not in user_text.lower():
                    continue
                if not resp.get("repeat"):
                    del self._chat[i]
                picked = copy.deepcopy(resp)
                if variants := resp.get("variants"):
                    used = resp["used"] = resp.get("used", 0) + 1
                    picked["content"] = variants[(used - 1) % len(variants)]
                return picked
        if last.get("role") == "tool":
            trailing: list[str] = []
            for m in reversed(messages):
                if m.get("role") != "tool":
                    break
                trailing.insert(0, _text_of(m.get("content")))
            return {"content": "Done: " + "; ".join(trailing)}
        return {"content": "You said: " + user_text}

    async def _chat_route(self, request: web.Request, record: Json) -> web.StreamResponse:
        body: Json = record["json"]
        scripted = self._pick_chat(body["messages"])
        content: str | None = scripted.get("content")
        calls = [_tool_call(c) for c in scripted.get("tool_calls", [])]
        finish = "tool_calls" if calls else "stop"
        words = streamed_words(content or "")
        args = [c["function"]["arguments"] for c in calls]
        fragments = [
            [a[i : i + ARG_FRAGMENT] for i in range(0, len(a), ARG_FRAGMENT)] for a in args
        ]
        n = len(words) + sum(len(f) for f in fragments)
        p = max(1, len(json.dumps(body["messages"])) // 4)
        usage = {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}
        meta = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time())}
        meta |= {"model": body["model"], "system_fingerprint": "fp_fake"}
        prof = self.profile
        tps = prof["llm_tokens_per_s"]
        if not body.get("stream"):
            await asyncio.sleep(prof["llm_ttft_s"] + (n / tps if tps > 0 else 0.0))
            if record.get("fault", {}).get("cut_after_chunks") is not None:
                _abort(request)
            message: Json = {"role": "assistant", "content": content, "refusal": None}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            return web.json_response(
                {**meta, "object": "chat.completion", "choices": [choice], "usage": usage}
            )

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: Json, finish_reason: str | None = None) -> Json:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            extra = {"usage": None} if include_usage else {}
            return {**meta, "object": "chat.completion.chunk", "choices": [choice], **extra}

        # Token-paced events: words, then tool-call headers, then interleaved fragments.
        paced: list[Json] = [chunk({"content": w}) for w in words]
        for index, call in enumerate(calls):
            fn = {"name": call["function"]["name"], "arguments": ""}
            head = {"index": index, "id": call["id"], "type": "function", "function": fn}
            paced.append(chunk({"tool_calls": [head]}))
        for step in range(max((len(f) for f in fragments), default=0)):
            for index, frags in enumerate(fragments):
                if step < len(frags):
                    fn = {"arguments": frags[step]}
                    paced.append(chunk({"tool_calls": [{"index": index, "function": fn}]}))
        events = [chunk({"role": "assistant", "content": "" if content else None}), *paced]
        events.append(chunk({}, finish))
        if include_usage:
            events.append(
                {**meta, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            )

        await asyncio.sleep(prof["llm_ttft_s"])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        data = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
        if (bad := record.get("fault", {}).get("malformed_after_chunks")) is not None:
            data.insert(int(bad), b'data: {"choices": [{"delta": "not an object"}]}\n\n')
        # A token's time before every event, the stop included (the model generates it); the
        # usage chunk follows the stop at once, as OpenAI sends it.
        gaps = [0.0] + [1.0 / tps if tps > 0 else 0.0] * (len(events) - 1)
        if include_usage:
            gaps[-1] = 0.0
        cut = record.get("fault", {}).get("cut_after_chunks")
        await self._paced_write(request, resp, data, gaps, cut, record)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _responses_route(self, request: web.Request, record: Json) -> web.StreamResponse:
        """``POST /v1/responses``: the next ``script_chat`` answer (its ``reasoning``, a summary
        text, becomes a reasoning item), streamed as OpenAI's typed events
        (``testkit.fakes.responses_wire``) or, unstreamed, as the finished response."""
        body: Json = record["json"]
        scripted = self._pick_chat(responses_wire.chat_view(body))
        content: str | None = scripted.get("content")
        calls = [_tool_call(c) for c in scripted.get("tool_calls", [])]
        args = [c["function"]["arguments"] for c in calls]
        stream = responses_wire.answer_stream(
            body, content, calls, streamed_words(content or ""),
            [[a[i : i + ARG_FRAGMENT] for i in range(0, len(a), ARG_FRAGMENT)] for a in args],
            scripted.get("reasoning"))
        prof = self.profile
        tps = prof["llm_tokens_per_s"]
        token = 1.0 / tps if tps > 0 else 0.0
        if not body.get("stream"):
            await asyncio.sleep(prof["llm_ttft_s"] + token * sum(stream.paced))
            return web.json_response(stream.response)
        await asyncio.sleep(prof["llm_ttft_s"])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        gaps = [token if paced else 0.0 for paced in stream.paced]
        cut = record.get("fault", {}).get("cut_after_chunks")
        await self._paced_write(request, resp, stream.frames(), gaps, cut, record)
        await resp.write_eof()
        return resp

    async def _paced_write(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        chunks: list[bytes],
        gaps: list[float],
        cut_after: int | None,
        record: Json | None = None,
    ) -> None:
        """Write chunks, chunk i no earlier than start + sum(gaps[:i+1]); abort after cut_after.
        With ``record``: when each chunk was written (epoch seconds) goes in its ``sent_ts``."""
        sent: list[float] = []
        if record is not None:
            self._note(record, sent_ts=sent)
        due = time.monotonic()
        for i, (data, gap) in enumerate(zip(chunks, gaps, strict=True)):
            if cut_after is not None and i >= cut_after:
                _abort(request)
            due += gap
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            await resp.write(data)
            sent.append(time.time())
        if cut_after is not None and cut_after >= len(chunks):
            _abort(request)

    # ------------------------------------------------------------------ text to speech

    async def _tts(self, request: web.Request, record: Json) -> web.StreamResponse:
        """``/stream``: raw PCM, 100 ms a chunk."""
        return await self._tts_stream(request, record, "audio/pcm", lambda pcm: pcm)

    async def _tts_with_timestamps(
        self, request: web.Request, record: Json
    ) -> web.StreamResponse:
        """``/stream/with-timestamps``: a JSON line per 100 ms of PCM, ``{"audio_base64",
        "alignment", "normalized_alignment"}`` (the alignments null: the fake has none)."""

        def line(pcm: bytes) -> bytes:
            body = {"audio_base64": base64.b64encode(pcm).decode(), "alignment": None,
                    "normalized_alignment": None}
            return json.dumps(body).encode() + b"\n"

        return await self._tts_stream(request, record, "application/json", line)

    async def _tts_stream(
        self,
        request: web.Request,
        record: Json,
        content_type: str,
        frame: Callable[[bytes], bytes],
    ) -> web.StreamResponse:
        rate = PCM_RATES[request.query["output_format"]]
        text = str(record["json"]["text"])
        with self._lock:
            rendition = None
            if self._renditions is not None:
                rendition = self._renditions[text] = self._renditions.get(text, -1) + 1
                record["rendition"] = rendition
        pcm = spoken_pcm(text, rate, rendition)
        step = rate // 10 * 2  # 100 ms of 16-bit samples
        chunks = [pcm[i : i + step] for i in range(0, len(pcm), step)]
        prof = self.profile
        await asyncio.sleep(prof["tts_ttfb_s"])
        resp = web.StreamResponse(headers={"Content-Type": content_type})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        gaps = [0.0] + [len(c) / 2 / rate * prof["tts_rtf"] for c in chunks[:-1]]
        cut = record.get("fault", {}).get("cut_after_chunks")
        await self._paced_write(request, resp, [frame(c) for c in chunks], gaps, cut, record)
        await resp.write_eof()
        return resp


# ---------------------------------------------------------------------- out of process


class FakeProvidersClient(_Queries):
    """The object API over the ``/_fake/*`` admin routes, for a server in another process."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.openai_base_url = self.url + "/v1"
        self.elevenlabs_base_url = self.url

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}/_fake/{route}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def reset(self) -> None:
        self._call("POST", "reset")

    def script_chat(self, *responses: Json) -> None:
        self._call("POST", "chat", list(responses))

    def script_transcripts(self, *items: str | Json) -> None:
        self._call("POST", "transcripts", list(items))

    def set_default_transcript(self, text: str) -> None:
        self._call("POST", "transcripts", {"default_transcript": text})

    def inject(self, route: str, **fault: Any) -> None:
        self._call("POST", "faults", {"route": route, **fault})

    def vary_voice(self, varies: bool = True) -> None:
        self._call("POST", "voice", {"varies": varies})

    def set_profile(self, **fields: float) -> None:
        self._call("POST", "profile", fields)

    def state(self) -> Json:
        return dict(self._call("GET", "requests"))

    @property
    def requests(self) -> list[Json]:
        return list(self.state()["requests"])

    @property
    def seen_keys(self) -> set[str]:
        return set(self.state()["seen_keys"])

    @property
    def max_concurrency(self) -> dict[str, int]:
        return dict(self.state()["max_concurrency"])


def spawn(
    port: int = 0, profile: dict[str, float] | None = None, cwd: str | None = None
) -> tuple[subprocess.Popen[str], FakeProvidersClient]:
    """Start ``python -m testkit.fakes.provider_server`` and wait for its READY line."""
    cmd = [sys.executable, "-m", "testkit.fakes.provider_server", "--port", str(port)]
    if profile:
        cmd += ["--profile", json.dumps(profile)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=cwd)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"fake provider server failed to start: {line!r}")
    return proc, FakeProvidersClient(line.split(" ", 1)[1])


async def _serve(host: str, port: int, profile: dict[str, float] | None) -> None:
    fake = FakeProviders(host, port, profile)
    await fake.start_async()
    print(f"READY {fake.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await fake.stop_async()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--profile", type=json.loads, default=None, help="latency profile JSON")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.profile))


if __name__ == "__main__":
    main()
