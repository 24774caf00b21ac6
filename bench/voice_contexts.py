"""ElevenLabs' multi-context input stream: one connection, a context per piece of a reply.

``/v1/text-to-speech/{voice}/multi-stream-input`` takes text for several contexts over one
WebSocket and sends back each context's audio tagged with it, then its end. The official SDK
(2.78) has this socket's message types and no client, so the messages are built and read with
those types (``InitializeConnectionMulti``, ``SendTextMulti``, ``CloseContext``,
``CloseSocket``, ``AudioOutputMulti``, ``FinalOutputMulti``), over ``voice_socket``.

The floor bench's voice for one connection per turn (``python -m bench.voice_connection``:
0.85 of the CPU of a request per piece, README, *CPU per turn*). Written and tested as a
provider would be (TLS, refusals and breaks as ``ProviderError``), so that a TTS task per turn
can take it up if that shape is built; the workers do not use it.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from elevenlabs.types import (
    AudioOutputMulti,
    CloseContext,
    CloseSocket,
    FinalOutputMulti,
    InitializeConnectionMulti,
    SendTextMulti,
)
from elevenlabs.url_utils import build_ws_url
from pydantic import ValidationError

from bench.voice_socket import InvalidStatus, SocketClosed, VoiceSocket
from voxqueue.settings import Settings
from workers.runtime.retry import ProviderError, retry_after_seconds

DEFAULT_BASE_URL = "https://api.elevenlabs.io"


@dataclass(frozen=True)
class Audio:
    """A piece of a context's audio (16 kHz int16 PCM)."""

    context: str
    pcm: bytes


@dataclass(frozen=True)
class Done:
    """A context's audio is all sent."""

    context: str


def socket_url(settings: Settings) -> str:
    """The multi-context socket's address for the settings' voice and model, 16 kHz PCM."""
    base = settings.elevenlabs_base_url or DEFAULT_BASE_URL
    if not base.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) address: {base!r}")
    # The SDK's own builder (its realtime helper's): ws(s) scheme, percent-encoded parts.
    return build_ws_url(base, ["v1", "text-to-speech", settings.tts_voice, "multi-stream-input"],
                        {"model_id": settings.tts_model, "output_format": "pcm_16000"})


class VoiceContexts:
    """One connection to the voice; ``speak`` a context's text, read ``events`` as they come.

    Errors are ``ProviderError``: retryable when the voice was unreachable or refused the
    upgrade with 408/409/429/5xx (its Retry-After kept); not when it refused the key or a
    message, nor when the stream broke once audio came (spoken again, it would be heard twice).
    """

    def __init__(self, settings: Settings, *, deadline: float) -> None:
        timeout = max(1.0, min(settings.provider_timeout_s, deadline - time.time()))
        try:
            self.socket = VoiceSocket(
                socket_url(settings), {"xi-api-key": settings.require_elevenlabs_key()},
                timeout=timeout)
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise ProviderError(f"ElevenLabs refused the socket: HTTP {status}", status=status,
                                retryable=status in (408, 409, 429) or status >= 500,
                                retry_after=retry_after_seconds(exc.response.headers)) from exc
        except (OSError, SocketClosed) as exc:  # TimeoutError too
            raise ProviderError(f"ElevenLabs unreachable: {exc.__class__.__name__}",
                                retryable=True) from exc
        self._open: set[str] = set()

    def speak(self, context: str, text: str) -> None:
        """Open ``context``, give it all of ``text`` and close it: its audio follows, then its
        ``Done``."""
        for message in (InitializeConnectionMulti(context_id=context),
                        SendTextMulti(text=text.rstrip() + " ", context_id=context, flush=True),
                        CloseContext(context_id=context, close_context=True)):
            self._send(message)
        self._open.add(context)

    @property
    def speaking(self) -> frozenset[str]:
        """The contexts spoken and not done yet."""
        return frozenset(self._open)

    def events(self) -> Iterator[Audio | Done]:
        """Each context's audio and end, as they arrive (contexts spoken meanwhile too), for as
        long as the caller reads; a read waits up to the socket's timeout. Ends when the voice
        closes the connection with every context done."""
        try:
            for raw in self.socket.messages():
                event = _event(raw)
                if isinstance(event, Done):
                    self._open.discard(event.context)
                yield event
        except (OSError, SocketClosed) as exc:
            raise ProviderError(f"ElevenLabs stream broke: {exc}", retryable=False) from exc
        if self._open:
            raise ProviderError("ElevenLabs closed the socket with contexts unfinished: "
                                + ", ".join(sorted(self._open)))

    def close(self) -> None:
        """End the connection (what is not spoken yet is dropped)."""
        with contextlib.suppress(ProviderError):
            self._send(CloseSocket(close_socket=True))
        self.socket.close()

    def _send(self, message: Any) -> None:
        try:
            self.socket.send(json.dumps(message.dict()))
        except OSError as exc:
            raise ProviderError(f"ElevenLabs socket broke: {exc.__class__.__name__}") from exc

    def __enter__(self) -> VoiceContexts:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _event(raw: bytes) -> Audio | Done:
    """A server message as an event; an error message or a malformed one raises. An audio
    message of the usual shape is read without building the SDK's model (a tenth of its cost,
    for a hundred messages a turn); any other goes through the SDK's types."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        audio, context = data.get("audio"), data.get("contextId")
        if isinstance(audio, str) and isinstance(context, str) and not data.get("isFinal"):
            return Audio(context, binascii.a2b_base64(audio, strict_mode=True))
        if data.get("isFinal"):
            return Done(str(FinalOutputMulti.model_validate(data).context_id))
        if "audio" in data:
            out = AudioOutputMulti.model_validate(data)
            return Audio(str(out.context_id), binascii.a2b_base64(out.audio or "",
                                                                  strict_mode=True))
    except (ValueError, ValidationError, binascii.Error) as exc:
        raise ProviderError(f"ElevenLabs sent a malformed message: {exc}") from exc
    error = data.get("error") or data.get("message") or "unknown"
    raise ProviderError(f"ElevenLabs refused: {error} ({data.get('message', '')})")
