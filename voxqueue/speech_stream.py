"""A command's audio on a Redis stream while it is spoken: the writer (a client) and the entries
the STT worker reads as the stream grows.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from voxqueue.audio import SAMPLE_RATE, SAMPLE_WIDTH, AudioError
from voxqueue.errors import InputError

if TYPE_CHECKING:
    from voxqueue.turn_handle import Turn

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
