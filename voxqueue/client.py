"""The programmatic API: enqueue a turn (text or audio) and follow it to its end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from voxqueue.audio import AudioError, read_speech
from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, celery_config
from voxqueue.contracts import AgentStep, ErrorCode, SttJob, TurnSpec
from voxqueue.errors import InputError, Unavailable
from voxqueue.keys import Keys
from voxqueue.redis_conn import connect, redact
from voxqueue.settings import ClientSettings, get_client_settings
from voxqueue.speech_stream import BYTES_PER_S, SpeechStream, SpeechWriter
from voxqueue.turn_handle import Turn
from voxqueue.turns import TurnStore


def new_id() -> str:
    return uuid.uuid4().hex


class Client:
    """Enqueues turns and follows them. Thread-safe; reuse one per process."""

    def __init__(self, settings: ClientSettings | None = None) -> None:
        self.settings = settings or get_client_settings()
        self.keys = Keys(self.settings.redis.key_prefix)
        self.redis = connect(self.settings)
        self.store = TurnStore(self.redis, self.keys, self.settings.turns.ttl_s,
                               self.settings.turns.session_ttl_s)
        self._celery = Celery("voxqueue-client", set_as_current=False)
        self._celery.conf.update(celery_config(self.settings))

    # -- starting turns ------------------------------------------------------------------------
    def ask(self, text: str | bytes, *, session: str | None = None, device: str | None = None,
            speak: bool = True, deadline_s: float | None = None,
            effects_allowed: Sequence[str] | None = None, turn_id: str | None = None) -> Turn:
        """Start a turn from text; ``effects_allowed``: the only side-effecting tools it may
        run (None: all the workers offer); ``turn_id``: its id, when the caller chose it
        (``new_id``; the gateway holds budget for it first)."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(ErrorCode.INVALID_INPUT, f"the text is not valid UTF-8: {exc}")\
                    from exc
        text = text.strip()
        if not text:
            raise InputError(ErrorCode.INVALID_INPUT, "the text is empty")
        if len(text) > self.settings.turns.max_text_chars:
            raise InputError(
                ErrorCode.INVALID_INPUT,
                f"the text has {len(text)} characters, over the limit of "
                f"{self.settings.turns.max_text_chars} (VOXQUEUE_MAX_TEXT_CHARS)",
            )
        spec = self._spec("text", session, device, speak, deadline_s, text=text,
                          turn_id=turn_id, effects_allowed=None if effects_allowed is None
                          else tuple(effects_allowed))
        self._start(spec, None, AGENT_STEP, AgentStep(turn_id=spec.turn_id, step=1))
        return Turn(self, spec)

    def say(self, audio: str | Path | bytes, *, session: str | None = None,
            device: str | None = None, speak: bool = True, deadline_s: float | None = None,
            pcm_rate: int | None = None, created_at: float | None = None,
            turn_id: str | None = None) -> Turn:
        """Start a turn from speech: a WAV path, WAV bytes, or raw 16-bit PCM with ``pcm_rate``.

        The audio is checked and converted here, stored in Redis with a TTL, and the STT job
        carries only its key. ``created_at`` is the end of speech when the caller knows it.
        """
        return self._from_speech(audio, session=session, device=device, speak=speak,
                                 deadline_s=deadline_s, pcm_rate=pcm_rate, created_at=created_at,
                                 turn_id=turn_id)

    def transcribe(self, audio: str | Path | bytes, *, pcm_rate: int | None = None,
                   deadline_s: float | None = None, created_at: float | None = None) -> Turn:
        """Speech to text only: a turn that ends with its transcript (``result().transcript``),
        with no agent and nothing spoken. Audio as for :meth:`say`."""
        return self._from_speech(audio, session=None, device=None, speak=False,
                                 deadline_s=deadline_s, pcm_rate=pcm_rate, created_at=created_at,
                                 until="transcript")

    def _from_speech(self, audio: str | Path | bytes, *, session: str | None,
                     device: str | None, speak: bool, deadline_s: float | None,
                     pcm_rate: int | None, created_at: float | None,
                     until: str = "reply", turn_id: str | None = None) -> Turn:
        try:
            pcm = read_speech(audio, max_bytes=self.settings.turns.max_audio_bytes,
                              max_seconds=self.settings.turns.max_audio_seconds, pcm_rate=pcm_rate)
        except AudioError as exc:
            raise InputError(exc.code, str(exc)) from exc
        turn_id = turn_id or new_id()
        spec = self._spec("audio", session, device, speak, deadline_s, turn_id=turn_id,
                          audio_key=self.keys.audio(turn_id), audio_seconds=pcm.seconds,
                          created_at=created_at, until=until)
        self._start(spec, pcm.data, STT_TRANSCRIBE, SttJob(turn_id=spec.turn_id))
        return Turn(self, spec)

    def stream(self, *, session: str | None = None, device: str | None = None,
               speak: bool = True, deadline_s: float | None = None,
               until: Literal["reply", "transcript"] = "reply",
               turn_id: str | None = None) -> SpeechStream:
        """A turn whose audio is written while it is spoken (16 kHz mono int16): the STT job
        starts now and reads the audio as it arrives. Use as a context manager: ``write``
        frames, and the command ends when the block does (``abort`` on an exception)."""
        turn_id = turn_id or new_id()
        spec = self._spec("audio", session, device, speak, deadline_s, turn_id=turn_id,
                          audio_key=self.keys.speech(turn_id), audio_stream=True, until=until)
        self._start(spec, None, STT_TRANSCRIBE, SttJob(turn_id=turn_id))
        limit = min(self.settings.turns.max_audio_bytes,
                    int(self.settings.turns.max_audio_seconds * BYTES_PER_S))
        writer = SpeechWriter(self.redis, self.keys.speech(turn_id),
                              ended_key=self.keys.ended(turn_id), max_bytes=limit,
                              ttl_s=self.settings.turns.ttl_s)
        return SpeechStream(Turn(self, spec), writer)

    def speak(self, text: str, *, device: str | None = None, session: str | None = None,
              deadline_s: float | None = None) -> Turn:
        """Say ``text`` as it is (an announcement): a turn that skips STT and the agent.

        One TTS job (seq 0) is the whole reply; the turn ends when it has been spoken.
        """
        from voxqueue.celery_config import TTS_SPEAK
        from voxqueue.contracts import TtsJob

        text = text.strip()
        if not text:
            raise InputError(ErrorCode.INVALID_INPUT, "the text is empty")
        if len(text) > self.settings.turns.max_text_chars:
            raise InputError(ErrorCode.INVALID_INPUT, f"the text has {len(text)} characters, "
                             f"over the limit of {self.settings.turns.max_text_chars}")
        spec = self._spec("text", session, device, True, deadline_s, text=text)
        self.store.create(spec, agent=False)
        self.redis.hset(self.keys.turn(spec.turn_id),
                        mapping={"tts_sent": 1, "tts_total": 1, "tts_status": "ok"})
        self.store.emit(spec.turn_id, "reply", {"text": text, "spoken_as_is": True})
        self._send(TTS_SPEAK, TtsJob(turn_id=spec.turn_id, seq=0, text=text,
                                     enqueued_at=time.time()))
        return Turn(self, spec)

    def ping(self) -> bool:
        """Whether Redis answers now."""
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False

    def turn(self, turn_id: str) -> Turn:
        """A handle on an existing turn."""
        return Turn(self, self.store.spec(turn_id))

    def close(self) -> None:
        self.redis.close()
        self._celery.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------
    def _spec(self, kind: str, session: str | None, device: str | None, speak: bool,
              deadline_s: float | None, *, turn_id: str | None = None,
              created_at: float | None = None, **fields: object) -> TurnSpec:
        now = time.time()
        created = created_at if created_at is not None else now
        text = fields.get("text")
        if isinstance(text, str) and not text.isascii():
            try:  # lone surrogates (undecodable bytes, e.g. from argv) cannot be stored
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(ErrorCode.INVALID_INPUT,
                                 f"the text is not valid UTF-8: {exc}") from exc
        try:
            return TurnSpec.model_validate({
                "turn_id": turn_id or new_id(),
                "session_id": session or new_id(),
                "device": device,
                "input": kind,
                "created_at": created,
                "deadline": now + (deadline_s or self.settings.turns.deadline_s),
                "speak": speak,
                **fields,
            })
        except ValueError as exc:
            raise InputError(ErrorCode.INVALID_INPUT, f"invalid turn: {exc}") from exc

    def _start(self, spec: TurnSpec, audio: bytes | None, task: str,
               job: SttJob | AgentStep) -> None:
        """Store the turn and send its first job; a clear error when Redis is unreachable."""
        try:
            self.store.create(spec, audio=audio, agent=spec.until == "reply")
        except redis.RedisError as exc:
            raise Unavailable(f"Redis at {redact(self.settings.redis.url)} is unreachable: "
                              f"{exc}") from exc
        self._send(task, job)

    def _send(self, task: str, job: Any) -> None:
        from voxqueue.otel import turn_root  # the turn's root span when tracing is on

        job.enqueued_at = time.time()
        try:
            with turn_root(self.settings, job.turn_id, task) as headers:
                self._celery.send_task(task, args=[job.model_dump(mode="json")],
                                       argsrepr=job.describe(), headers=headers,
                                       ignore_result=True, task_id=job.task_id())
        except (redis.RedisError, OperationalError) as exc:
            raise Unavailable(f"Redis at {redact(self.settings.redis.url)} is unreachable: "
                              f"{exc}") from exc
