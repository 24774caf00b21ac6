"""The direct client: enqueue a turn (text or audio) on Redis and Celery and follow it to its end.

- :class:`Client` enqueues turns; :class:`Turn` is a handle on one turn: its events as they
  arrive, its result, its audio, its cancellation;
- :class:`SpeechStream` writes a command's audio on a Redis stream while it is spoken, and the
  STT worker reads the entries as the stream grows.

Entries (version 1), on the turn's ``audio_key`` (a stream with the turn's TTL):

- ``{"pcm": bytes}``: 16 kHz mono int16, in the order spoken (written in pieces of at least
  ``PIECE_BYTES``, so a 10 ms frame is not a Redis command);
- ``{"end": "1", "spoken_until": seconds, "ended_at": epoch}``: the command is complete;
  ``spoken_until`` is the audio time of the last voiced frame when the writer knows it;
- ``{"abort": reason}``: the writer gave up (the turn is cancelled with it).

The writer refuses audio past ``max_bytes`` (``VOXQUEUE_MAX_AUDIO_BYTES``, and no more than
``VOXQUEUE_MAX_AUDIO_SECONDS`` of it), so the stream is never trimmed and an STT task delivered
again reads it whole from the start. Once the turn has ended (its ``ended`` flag), nothing more
is written: the stream, deleted with the turn's end, is never made again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import redis
from kombu.exceptions import OperationalError

from voxqueue.audio import SAMPLE_RATE, SAMPLE_WIDTH, AudioError, read_speech, to_wav
from voxqueue.celery_config import AGENT_STEP, STT_TRANSCRIBE, make_celery
from voxqueue.client.errors import InputError, Unavailable
from voxqueue.client.result import assemble, in_speaking_order
from voxqueue.contracts import AgentStep, ErrorCode, SttJob, TurnEvent, TurnResult, TurnSpec
from voxqueue.keys import Keys
from voxqueue.redis_conn import connect, redact
from voxqueue.settings import ClientSettings, get_client_settings
from voxqueue.turns import StreamEntry, TurnStore

#: Seconds a waiting client gives the workers past the deadline before ending the turn itself.
DEADLINE_GRACE_S = 5.0


class Turn:
    """A running or finished turn: its events, its result, its audio."""

    def __init__(self, client: Client, spec: TurnSpec) -> None:
        self.client = client
        self.spec = spec
        self._entries: list[StreamEntry] = []
        self._last_id = "0"
        self._done = False

    @property
    def turn_id(self) -> str:
        return self.spec.turn_id

    @property
    def session_id(self) -> str:
        return self.spec.session_id

    @property
    def done(self) -> bool:
        """Whether this handle has read the turn's end."""
        return self._done

    def events(self, timeout: float | None = None) -> Iterator[StreamEntry]:
        """Yield entries as they arrive, until ``run-end``.

        Past the deadline (plus a grace period) with no ``run-end``, the client ends the turn
        itself with a timeout error, so a caller never waits forever; while the server is
        unreachable it keeps trying until then, and ends the turn locally if it must.
        """
        yield from self._entries
        give_up = min(self.spec.deadline + DEADLINE_GRACE_S,
                      time.time() + timeout if timeout is not None else float("inf"))
        unreachable: str | None = None
        ended_by_us = False
        while not self._done:
            wait_ms = int(max(0.05, min(1.0, give_up - time.time())) * 1000)
            try:
                entries = self._read(wait_ms)
                unreachable = None
            except (redis.RedisError, Unavailable) as exc:
                unreachable = f"{exc.__class__.__name__}: {exc}"
                entries = []
                time.sleep(min(0.5, max(0.0, give_up - time.time())))
            for entry in entries:
                self._last_id = entry.id
                self._entries.append(entry)
                if entry.event.type == "run-end":
                    self._done = True
                yield entry
            if not self._done and time.time() >= give_up:
                if timeout is not None and give_up < self.spec.deadline + DEADLINE_GRACE_S:
                    raise TimeoutError(f"turn {self.turn_id} still running after {timeout} s")
                if unreachable is None and not ended_by_us:
                    ended_by_us = True
                    if self._give_up():  # its run-end is on the stream now: read it
                        continue
                    yield from self._end_locally(ErrorCode.TIMEOUT,
                                                 "no reply before the turn's deadline")
                    continue
                if unreachable is None:  # ended, yet no run-end to read (the stream expired)
                    yield from self._end_locally(ErrorCode.TIMEOUT,
                                                 "the turn ended but its events are gone")
                    continue
                yield from self._end_locally(ErrorCode.REDIS_UNAVAILABLE,
                                             f"the server is unreachable ({unreachable})")

    def _read(self, block_ms: int) -> list[StreamEntry]:
        """The entries after the last one read, waiting up to ``block_ms`` for the first."""
        return self.client.store.read(self.turn_id, self._last_id, block_ms=block_ms)

    def _give_up(self) -> bool:
        """End the overdue turn at the server (or find it ended); False when it cannot."""
        self.client.store.finish(self.spec, "timeout", (
            ErrorCode.TIMEOUT, "no reply before the turn's deadline"))
        return True

    def _end_locally(self, code: ErrorCode, message: str) -> Iterator[StreamEntry]:
        """End the turn in this process when Redis cannot be reached to record the end."""
        now = time.time()
        for event in (TurnEvent(type="error", turn_id=self.turn_id, ts=now,
                                data={"code": str(code), "message": message}),
                      TurnEvent(type="run-end", turn_id=self.turn_id, ts=now,
                                data={"status": "timeout", "local": True})):
            entry = StreamEntry(id=self._last_id, event=event)
            self._entries.append(entry)
            yield entry
        self._done = True

    def playback(self, timeout: float | None = None) -> Iterator[bytes]:
        """The reply's PCM in speaking order, each chunk as soon as it can be played (see
        :func:`voxqueue.client.result.in_speaking_order`: nothing skipped; a sentence whose audio
        was interrupted is heard again from its start, never spliced)."""
        yield from in_speaking_order(self.events(timeout=timeout))

    def wait(self, timeout: float | None = None) -> TurnResult:
        """Block until the turn ends; return its result."""
        for _ in self.events(timeout=timeout):
            pass
        return self.result()

    def result(self) -> TurnResult:
        return assemble(self.spec, self._entries)[0]

    def audio(self) -> bytes:
        """The reply as 16 kHz mono 16-bit PCM (what has arrived so far)."""
        return assemble(self.spec, self._entries)[1]

    def save_audio(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(to_wav(self.audio()))
        return out

    def cancel(self, reason: str = "cancelled by the caller") -> bool:
        """Stop the turn in every stage: stages check the flag and stop; the turn ends now.
        False when it had already ended (nothing is written then)."""
        store = self.client.store
        if store.ended(self.turn_id):
            return False
        # The event first: a stage that sees the flag ends the turn at once, and nothing is
        # written after the end.
        store.emit(self.turn_id, "cancelled", {"reason": reason})
        store.cancel(self.turn_id, reason)
        store.finish(self.spec, "cancelled")
        return True


#: Audio is written in pieces of at least this many bytes (0.1 s).
PIECE_BYTES = SAMPLE_RATE * SAMPLE_WIDTH // 10

BYTES_PER_S = SAMPLE_RATE * SAMPLE_WIDTH

# Append one entry unless the turn has ended, and keep the stream's expiry.
# KEYS: the stream, the turn's ended flag. ARGV: the TTL, then the entry's fields and values.
_APPEND = """
if redis.call('exists', KEYS[2]) == 1 then return 0 end
redis.call('xadd', KEYS[1], '*', unpack(ARGV, 2))
redis.call('expire', KEYS[1], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class Piece:
    """One entry of the stream, as the worker reads it."""

    id: str
    pcm: bytes = b""
    end: bool = False
    abort: str | None = None
    spoken_until: float | None = None
    ended_at: float | None = None


def parse(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Piece:
    ident = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    if b"pcm" in fields:
        return Piece(ident, pcm=bytes(fields[b"pcm"]))
    if b"abort" in fields:
        return Piece(ident, abort=fields[b"abort"].decode(errors="replace") or "aborted")
    if b"end" in fields:
        until = fields.get(b"spoken_until")
        return Piece(ident, end=True, spoken_until=float(until) if until else None,
                     ended_at=float(fields.get(b"ended_at", b"0")) or None)
    return Piece(ident)  # an entry of a later version: skipped


def read(r: redis.Redis, key: str, after: str, block_ms: int) -> list[Piece]:
    """The entries after ``after`` ("0": from the start), waiting up to ``block_ms``."""
    got: Any = r.xread({key: after}, count=200, block=block_ms)
    if not got:
        return []
    return [parse(entry_id, fields) for entry_id, fields in got[0][1]]


class SpeechWriter:
    """Writes one command's audio to its stream as it is captured."""

    def __init__(self, r: redis.Redis, key: str, *, ended_key: str, max_bytes: int,
                 ttl_s: int) -> None:
        self.r = r
        self.key = key
        self.ended_key = ended_key
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.written = 0
        self.closed = False
        self._piece = bytearray()
        self._append = r.register_script(_APPEND)

    @property
    def seconds(self) -> float:
        return (self.written + len(self._piece)) / (SAMPLE_RATE * SAMPLE_WIDTH)

    def write(self, pcm: bytes) -> None:
        """Append audio (16 kHz mono int16); :class:`AudioError` past the size limit."""
        if self.closed:
            raise AudioError("audio-invalid", "the command's audio has already ended")
        if self.written + len(self._piece) + len(pcm) > self.max_bytes:
            raise AudioError("audio-too-large", f"the audio is over the limit of "
                             f"{self.max_bytes} bytes ({self.max_bytes / BYTES_PER_S:g} s; "
                             f"VOXQUEUE_MAX_AUDIO_BYTES, VOXQUEUE_MAX_AUDIO_SECONDS)")
        self._piece += pcm
        if len(self._piece) >= PIECE_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the audio held so far; :class:`AudioError` once the turn has ended."""
        if self._piece:
            if not self._write("pcm", bytes(self._piece)):
                self.closed = True
                raise AudioError("turn-ended", "the turn has ended: no more audio is taken")
            self.written += len(self._piece)
            self._piece.clear()

    def _write(self, *fields: str | bytes) -> bool:
        return bool(self._append(keys=[self.key, self.ended_key],
                                 args=[self.ttl_s, *fields]))

    def end(self, spoken_until: float | None = None) -> None:
        """The command is complete."""
        self.flush()
        fields: dict[Any, Any] = {"end": "1", "ended_at": repr(time.time())}
        if spoken_until is not None:
            fields["spoken_until"] = repr(spoken_until)
        self._close(fields)

    def abort(self, reason: str) -> None:
        self._piece.clear()
        self._close({"abort": reason[:200]})

    def _close(self, fields: dict[Any, Any]) -> None:
        if self.closed:
            return
        self.closed = True
        self._write(*(item for pair in fields.items() for item in pair))


class SpeechStream:
    """A turn being spoken: ``write`` its audio, then ``end`` (or ``abort``) it. The turn's
    events (a partial transcript, say) can be read from ``turn`` meanwhile."""

    def __init__(self, turn: Turn, writer: SpeechWriter) -> None:
        self.turn = turn
        self.writer = writer

    def write(self, pcm: bytes) -> None:
        try:
            self.writer.write(pcm)
        except AudioError as exc:
            self.abort(str(exc))
            raise InputError(exc.code, str(exc)) from exc

    def end(self, spoken_until: float | None = None) -> Turn:
        """The command is complete; the turn goes on (STT, agent, reply)."""
        self.writer.end(spoken_until)
        return self.turn

    def abort(self, reason: str = "the speech was abandoned") -> None:
        """Drop the command: the stream ends and the turn is cancelled in every stage."""
        if not self.writer.closed:
            self.writer.abort(reason)
            self.turn.cancel(reason)

    def __enter__(self) -> SpeechStream:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if kind is None:
            if not self.writer.closed:
                self.end()
        else:
            self.abort(f"the speech was abandoned: {exc}")


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
        self._celery = make_celery(self.settings, "voxqueue-client")

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
        from voxqueue.observability.otel import turn_root  # the turn's root span when tracing is on

        job.enqueued_at = time.time()
        try:
            with turn_root(self.settings, job.turn_id, task) as headers:
                self._celery.send_task(task, args=[job.model_dump(mode="json")],
                                       argsrepr=job.describe(), headers=headers,
                                       ignore_result=True, task_id=job.task_id())
        except (redis.RedisError, OperationalError) as exc:
            raise Unavailable(f"Redis at {redact(self.settings.redis.url)} is unreachable: "
                              f"{exc}") from exc
