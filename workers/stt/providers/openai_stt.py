"""OpenAI transcription through the official SDK: the whole command uploaded, or (a command
streamed while it is spoken, ``VOXQUEUE_OPENAI_STT_TRANSPORT=realtime``) sent as it is captured
on a Realtime transcription session.

The Realtime session (:class:`OpenAIRealtimeHearing`) is a WebSocket, through the official
SDK's ``client.realtime.connect``, for a command streamed while it is spoken.

The audio goes to OpenAI as it is captured (resampled to the 24 kHz the API takes). At each of
the speaker's pauses the audio so far is committed, so OpenAI transcribes it while the device
is still waiting out the silence; when the command ends, only audio spoken since the last
commit is left to transcribe (often none). Over TLS the session's socket is entered by one
thread at a time (``voxqueue.tls_websocket``). A session that fails (refused, dropped, an error
event, no answer in time) falls back to uploading the whole command, with the upload's retries.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
from typing import Any

import numpy as np

from voxqueue.audio import SAMPLE_RATE, resample, to_wav
from voxqueue.settings import Settings
from voxqueue.tls_websocket import CONNECTION_OPTIONS
from workers.runtime.openai_client import make_openai, provider_error
from workers.runtime.retry import call_with_retry
from workers.stt.providers.base import Transcript

log = logging.getLogger(__name__)

API_RATE = 24000

#: The API refuses to commit less than 100 ms of audio.
MIN_COMMIT_BYTES = API_RATE * 2 // 10


class RealtimeFailed(Exception):
    """The session cannot give the transcript (the upload is used instead)."""


class OpenAIRealtimeHearing:
    """One command on a Realtime transcription session."""

    def __init__(self, owner: OpenAITranscriber, deadline: float) -> None:
        import webrtcvad

        self.owner, s = owner, owner.settings
        self.deadline = deadline
        self.audio = bytearray()  # 16 kHz, for the upload if the session fails
        self._vad = webrtcvad.Vad(2)
        self._voiced = False  # speech since the last commit
        self._pending = 0  # bytes (24 kHz) appended since the last commit
        self._state = threading.Condition()
        self._committed = 0  # commits sent
        self._items: list[str] = []  # committed items, in order
        self._texts: dict[str, str] = {}  # their transcripts, once complete
        self._deltas: dict[str, str] = {}
        self._failure: str | None = None
        self._conn = owner.client.realtime.connect(
            extra_query={"intent": "transcription"},
            websocket_connection_options=CONNECTION_OPTIONS,  # type: ignore[arg-type]
        ).enter()
        self._send({"type": "session.update", "session": _session(s)})
        threading.Thread(target=self._read, name="openai-realtime", daemon=True).start()

    # -- Hearing ----------------------------------------------------------------------------
    def feed(self, pcm: bytes) -> None:
        if not pcm:
            return
        frame = SAMPLE_RATE * 2 // 50
        whole = len(self.audio) - len(self.audio) % frame
        self.audio += pcm
        for at in range(whole, len(self.audio) - frame + 1, frame):
            self._voiced |= self._vad.is_speech(bytes(self.audio[at:at + frame]), SAMPLE_RATE)
        samples = np.frombuffer(pcm[:len(pcm) // 2 * 2], dtype="<i2").astype(np.float32)
        out = resample(samples, SAMPLE_RATE, API_RATE).astype("<i2").tobytes()
        self._pending += len(out)
        self._send({"type": "input_audio_buffer.append", "audio": base64.b64encode(out).decode()})

    def pause(self) -> None:
        """The speaker paused: have the words so far transcribed now."""
        self._commit()

    def partial(self) -> Transcript:
        with self._state:
            words = [self._texts.get(i, self._deltas.get(i, "")) for i in self._items]
        return Transcript(text=" ".join(w.strip() for w in words if w.strip()))

    def finish(self) -> Transcript:
        started = time.perf_counter()
        try:
            if self._voiced:  # words since the last commit
                self._commit()
            return Transcript(text=self._wait_all(), ttfb_ms=_ms(started))
        except RealtimeFailed as exc:
            log.warning("stt: the Realtime session failed (%s); uploading the command", exc)
            return self.owner.transcribe(bytes(self.audio), deadline=self._until())

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception as exc:  # already gone
            log.debug("stt: closing the Realtime session: %s", exc)

    # -- the session ------------------------------------------------------------------------
    def _commit(self) -> None:
        if self._pending < MIN_COMMIT_BYTES:
            return
        self._pending, self._voiced = 0, False
        with self._state:
            self._committed += 1
        self._send({"type": "input_audio_buffer.commit"})

    def _wait_all(self) -> str:
        """Every committed item's transcript, in order, once all are complete."""
        until = time.monotonic() + max(0.0, self._until() - time.time())
        with self._state:
            while not self._failure and (len(self._items) < self._committed
                                         or any(i not in self._texts for i in self._items)):
                if not self._state.wait(max(0.0, until - time.monotonic())):
                    raise RealtimeFailed("no transcript in time")
            if self._failure:
                raise RealtimeFailed(self._failure)
            return " ".join(t.strip() for i in self._items if (t := self._texts[i]).strip())

    def _until(self) -> float:
        """When the transcript must be in hand (epoch s): the turn's deadline, or the
        provider timeout from now when that comes first."""
        return min(self.deadline, time.time() + self.owner.settings.providers.timeout_s)

    def _send(self, event: dict[str, Any]) -> None:
        try:
            self._conn.send(event)  # type: ignore[arg-type]
        except Exception as exc:
            self._fail(f"sending failed: {exc.__class__.__name__}")

    def _fail(self, why: str) -> None:
        with self._state:
            self._failure = self._failure or why
            self._state.notify_all()

    def _read(self) -> None:
        try:
            while True:
                event = json.loads(self._conn.recv_bytes())
                self._on(event)
        except Exception as exc:  # closed (by us or the server)
            self._fail(f"the session ended ({exc.__class__.__name__})")

    def _on(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        with self._state:
            if kind == "input_audio_buffer.committed":
                self._items.append(str(event["item_id"]))
            elif kind == "conversation.item.input_audio_transcription.delta":
                item = str(event["item_id"])
                self._deltas[item] = self._deltas.get(item, "") + str(event.get("delta", ""))
            elif kind == "conversation.item.input_audio_transcription.completed":
                self._texts[str(event["item_id"])] = str(event.get("transcript", ""))
            elif kind in ("conversation.item.input_audio_transcription.failed", "error"):
                error = event.get("error") or {}
                self._failure = self._failure or f"{kind}: {error.get('code') or 'error'}"
            self._state.notify_all()


def _session(s: Settings) -> dict[str, Any]:
    """A transcription session: 24 kHz PCM in, our model, commits made by us (no server VAD)."""
    return {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": API_RATE},
        "transcription": {"model": s.providers.stt_model},
        "turn_detection": None}}}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


class OpenAITranscriber:
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = make_openai(settings, "STT (OpenAI)")

    def hear(self, *, deadline: float = math.inf) -> OpenAIRealtimeHearing | None:
        """A Realtime session for a streamed command; None (upload at the end) when the
        transport is ``upload`` or the session cannot be opened."""
        if self.settings.providers.openai_stt_transport != "realtime":
            return None
        try:
            return OpenAIRealtimeHearing(self, deadline)
        except Exception as exc:  # refused, unreachable, the extra missing
            log.warning("stt: no Realtime session (%s: %s); the command will be uploaded",
                        exc.__class__.__name__, exc)
            return None

    def transcribe(self, pcm: bytes, *, deadline: float) -> Transcript:
        wav = to_wav(pcm)
        s = self.settings

        def attempt() -> Transcript:
            started = time.perf_counter()
            try:
                answer = self.client.audio.transcriptions.create(
                    model=s.providers.stt_model, file=("utterance.wav", wav, "audio/wav"),
                    timeout=max(1.0, min(s.providers.timeout_s, deadline - time.time())),
                )
            except Exception as exc:  # the SDK's errors, mapped to retryable or not
                raise provider_error(exc, "OpenAI transcription") from exc
            text = answer if isinstance(answer, str) else answer.text
            return Transcript(text=text.strip(), ttfb_ms=(time.perf_counter() - started) * 1000)

        return call_with_retry(attempt, attempts=s.providers.max_attempts,
                               base_s=s.providers.backoff_s, cap_s=s.providers.backoff_max_s,
                               deadline=deadline)
