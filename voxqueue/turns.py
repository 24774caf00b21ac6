"""The turn's shared state in Redis: its spec, its event stream, cancellation and its end.

Both sides use this module: the client creates turns and reads their events; every worker stage
appends events and checks for cancellation and the deadline. Ending a turn is idempotent, so
whoever notices the end first (a stage, the deadline sweeper, a client giving up) writes it once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from voxqueue.audio import SAMPLE_RATE
from voxqueue.budgets import SPEAK_CHARS, charged_device
from voxqueue.contracts import ErrorCode, EventType, TurnEvent, TurnSpec
from voxqueue.keys import Keys
from voxqueue.once import Fence, Fenced, Once

#: Longest sleep of the housekeeping loop (``workers/housekeeping/loop.py``), which ends overdue
#: turns: a turn due sooner than this wakes it as it begins.
HOUSEKEEPING_SLEEP_S = 5.0

#: Entries a turn's stream keeps at most (a bound, far above a real turn's few hundred).
STREAM_MAXLEN = 20_000
#: Sessions the index keeps at most (the least recently used are dropped from the index).
SESSION_INDEX_MAX = 100_000

# Append an event unless the turn has ended (run-end is always its last event), and only for
# the newest attempt of the writing job when a fence is given.
# KEYS: the events stream, the ended flag, the fence ("" for none), the cancel flag ("" to
# write even when cancelled), the turn hash (only for audio, see below).
# ARGV: the fence's attempt, the stream's cap, the number of entries, then per entry the count
# of its field/value arguments and those. With the turn hash, three more: a sentence's seq and
# where its audio now ends (bytes): the turn records how far the listener's audio goes, and
# when the turn's first audio went out (Redis's clock), for ``TurnStore.audio_ahead``; and a
# token of the call, so the same call sent again (a retry after a lost reply) writes nothing.
_EMIT = """
if KEYS[5] then
  local i = 4
  for _ = 1, tonumber(ARGV[3]) do i = i + 1 + tonumber(ARGV[i]) end
  if redis.call('hsetnx', KEYS[5], 'emitted:' .. ARGV[i + 2], 1) == 0 then return 'again' end
end
if redis.call('exists', KEYS[2]) == 1 then return false end
if KEYS[3] ~= '' and redis.call('get', KEYS[3]) ~= ARGV[1] then return -1 end
if KEYS[4] and KEYS[4] ~= '' and redis.call('exists', KEYS[4]) == 1 then return -2 end
local id
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local n = tonumber(ARGV[i])
  id = redis.call('xadd', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, i + 1, i + n))
  i = i + 1 + n
end
if KEYS[5] then
  local t = redis.call('time')
  redis.call('hsetnx', KEYS[5], 'audio_at', t[1] .. '.' .. string.format('%06d', t[2]))
  redis.call('hset', KEYS[5], 'audio:' .. ARGV[i], ARGV[i + 1])
end
return id
"""

# Delete the session lock only when the given turn still holds it.
_RELEASE_LOCK = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


# Give the session to a turn, in the order the session's turns were created: the turn takes the
# lock only when it is the oldest of the session's waiting turns still active (a waiting turn
# that has ended, or expired, is dropped from the line; a turn not in the line goes when the
# lock is free). KEYS: the lock, the waiting line, the active turns. ARGV: the turn, lock TTL.
_TAKE_SESSION = """
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then return 1 end
if holder then return 0 end
for _, waiting in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
  if waiting == ARGV[1] then break end
  if redis.call('zscore', KEYS[3], waiting) then return 0 end
  redis.call('zrem', KEYS[2], waiting)
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""


class TurnNotFound(LookupError):
    """The turn's spec is not in Redis (never created, or expired)."""


@dataclass(frozen=True)
class StreamEntry:
    """One entry of a turn's stream: an event and, for ``tts-chunk``, its PCM."""

    id: str
    event: TurnEvent
    pcm: bytes | None = None


class TurnStore:
    """Reads and writes turns in Redis. ``r`` must not decode responses (audio is binary)."""

    def __init__(self, r: redis.Redis, keys: Keys, ttl_s: int,
                 session_ttl_s: int = 7 * 24 * 3600) -> None:
        self.r = r
        self.keys = keys
        self.ttl_s = ttl_s
        self.session_ttl_s = session_ttl_s
        self._release_lock = r.register_script(_RELEASE_LOCK)
        self._emit = r.register_script(_EMIT)

    # -- creating and reading ----------------------------------------------------------------
    def create(self, spec: TurnSpec, audio: bytes | None = None, *, agent: bool = True) -> None:
        """Store the spec (and audio, the claim check) and write ``run-start``, atomically and
        once.

        A turn for the agent (``agent``) joins its session's line, which orders the session's
        turns; an announcement, which skips the agent, does not.
        """
        k = self.keys
        start = TurnEvent(type="run-start", turn_id=spec.turn_id, ts=spec.created_at, data={
            "session_id": spec.session_id, "device": spec.device, "input": spec.input,
            "deadline": spec.deadline})
        # One script, once: the client's retry after a lost reply (a failover) finds its own
        # marker and writes nothing again, or finds none (the write was lost with the primary)
        # and writes it all; with replicas, it is on them before the turn's first job is sent.
        once = Once(self.r, marker=k.marker(spec.turn_id, "created"), ttl_s=self.ttl_s)
        if audio is not None:
            assert spec.audio_key is not None
            once.call("SET", spec.audio_key, audio, "EX", self.ttl_s)
        once.call("HSET", k.turn(spec.turn_id), "spec", spec.model_dump_json())
        once.call("EXPIRE", k.turn(spec.turn_id), self.ttl_s)
        once.call("ZADD", k.active_turns(), spec.deadline, spec.turn_id)
        if spec.deadline - time.time() < HOUSEKEEPING_SLEEP_S:  # due before it would look
            once.call("LPUSH", k.timers_wake(), b"1")
            once.call("LTRIM", k.timers_wake(), 0, 0)
        if agent:  # the session's line: its turns reach the agent in the order they were made
            once.call("ZADD", k.session_waiting(spec.session_id), spec.created_at, spec.turn_id)
            once.call("EXPIRE", k.session_waiting(spec.session_id), self.ttl_s)
        once.call("XADD", k.events(spec.turn_id), "*", "e", start.model_dump_json())
        once.call("EXPIRE", k.events(spec.turn_id), self.ttl_s)
        # The session index is bounded: idle sessions age out, and it never holds more than
        # SESSION_INDEX_MAX (their histories expire on their own TTL).
        once.call("ZADD", k.sessions(), spec.created_at, spec.session_id)
        once.call("ZREMRANGEBYSCORE", k.sessions(), "-inf", spec.created_at - self.session_ttl_s)
        once.call("ZREMRANGEBYRANK", k.sessions(), 0, -SESSION_INDEX_MAX - 1)
        once.call("EXPIRE", k.sessions(), self.session_ttl_s)
        once.run()

    def spec(self, turn_id: str) -> TurnSpec:
        raw: Any = self.r.hget(self.keys.turn(turn_id), "spec")
        if raw is None:
            raise TurnNotFound(f"turn {turn_id} is unknown or expired")
        return TurnSpec.model_validate_json(raw)

    def read(self, turn_id: str, last_id: str = "0", block_ms: int | None = None,
             count: int = 500) -> list[StreamEntry]:
        """Entries after ``last_id``; waits up to ``block_ms`` when there are none yet."""
        answer: Any = self.r.xread({self.keys.events(turn_id): last_id}, count=count,
                                   block=block_ms)
        entries: list[StreamEntry] = []
        for _stream, items in answer or []:
            for entry_id, fields in items:
                entries.append(_parse_entry(entry_id, fields))
        return entries

    def history(self, turn_id: str) -> Iterator[StreamEntry]:
        """Every entry written so far, oldest first."""
        items: Any = self.r.xrange(self.keys.events(turn_id))
        for entry_id, fields in items:
            yield _parse_entry(entry_id, fields)

    # -- writing -----------------------------------------------------------------------------
    def emit(self, turn_id: str, type: EventType, data: Mapping[str, Any] | None = None,
             pcm: bytes | None = None, fence: Fence | None = None) -> TurnEvent:
        """Append one event, unless the turn has already ended: one round trip (a script).

        With a ``fence``, raises :class:`Fenced` (nothing written) when a newer attempt of the
        writing job has taken over. The stream's expiry was set when the turn began.
        """
        event = TurnEvent(type=type, turn_id=turn_id, data=dict(data or {}))
        self._append(event, pcm, fence, stop_on_cancel=False)
        return event

    def emit_unless_stopped(self, turn_id: str, type: EventType,
                            data: Mapping[str, Any] | None = None, pcm: bytes | None = None,
                            fence: Fence | None = None, before: Sequence[TurnEvent] = (),
                            audio_end: tuple[int, int] | None = None) -> str:
        """``emit``, unless the turn has ended or was cancelled: returns "emitted", "ended" or
        "cancelled" (nothing written then), in the same one round trip. ``before``: events
        written just before it, in that same round trip. ``audio_end``: (seq, bytes) for a
        chunk of speech, where that sentence's audio now ends (``audio_ahead``)."""
        event = TurnEvent(type=type, turn_id=turn_id, data=dict(data or {}))
        return self._append(event, pcm, fence, stop_on_cancel=True, before=before,
                            audio_end=audio_end)

    def audio_ahead_in(self, pipe: Any, turn_id: str, seq: int) -> None:
        """Add to ``pipe`` what ``audio_ahead`` reads for sentence ``seq``: when the turn's
        audio began, where each earlier sentence's audio ends, and Redis's clock."""
        pipe.hmget(self.keys.turn(turn_id), ["audio_at", *(f"audio:{s}" for s in range(seq))])
        pipe.time()

    @staticmethod
    def audio_ahead(marks: Sequence[Any], now: Sequence[Any]) -> float:
        """Seconds of audio a listener playing the turn in order has yet to hear before the
        sentence: at least this much (audio not yet written is not counted; 0 before any)."""
        began, *ends = marks
        if began is None:
            return 0.0
        audio_s = sum(int(end) for end in ends if end) / (SAMPLE_RATE * 2)
        return max(0.0, float(began) + audio_s - (int(now[0]) + int(now[1]) / 1e6))

    def emit_in(self, pipe: Any, event: TurnEvent, fence: Fence | None = None) -> None:
        """``emit`` as a command of ``pipe`` (the script sent with its text: no load needed);
        pass its result to :meth:`emitted`."""
        keys, args = self._emit_call(event, None, fence, stop_on_cancel=False)
        pipe.eval(_EMIT, len(keys), *keys, *args)

    def emitted(self, turn_id: str, result: Any) -> str:
        """What an ``emit_in`` did: "emitted", "ended" or "cancelled"; raises ``Fenced``."""
        if result == -1:
            raise Fenced(f"turn {turn_id}: a newer attempt owns this job")
        return "cancelled" if result == -2 else "ended" if result is None else "emitted"

    def _append(self, event: TurnEvent, pcm: bytes | None, fence: Fence | None, *,
                stop_on_cancel: bool, before: Sequence[TurnEvent] = (),
                audio_end: tuple[int, int] | None = None) -> str:
        """The ``_EMIT`` script: "emitted", "ended" or "cancelled"; raises ``Fenced``."""
        keys, args = self._emit_call(event, pcm, fence, stop_on_cancel, before, audio_end)
        return self.emitted(event.turn_id, self._emit(keys=keys, args=args))

    def _emit_call(self, event: TurnEvent, pcm: bytes | None, fence: Fence | None,
                   stop_on_cancel: bool, before: Sequence[TurnEvent] = (),
                   audio_end: tuple[int, int] | None = None,
                   ) -> tuple[list[str], list[str | bytes | int]]:
        turn_id = event.turn_id
        args: list[str | bytes | int] = [fence.attempt if fence else 0, STREAM_MAXLEN,
                                         1 + len(before)]
        for earlier in before:
            args += [2, "e", earlier.model_dump_json()]
        args += [2 if pcm is None else 4, "e", event.model_dump_json()]
        if pcm is not None:
            args += ["pcm", pcm]
        keys = [self.keys.events(turn_id), self.keys.ended(turn_id), fence.key if fence else ""]
        if stop_on_cancel or audio_end is not None:
            keys.append(self.keys.cancel(turn_id) if stop_on_cancel else "")
        if audio_end is not None:
            keys.append(self.keys.turn(turn_id))
            # A token of this call: sent again by the client's retry after a lost reply (a
            # failover: the chunk may be on the new primary already), it is written once.
            args += [*audio_end, uuid.uuid4().hex]
        return keys, args

    def once(self, turn_id: str, name: str, fence: Fence | None = None) -> Once:
        """Writes that happen the first time ``name`` is claimed for this turn, atomically with
        the claim: ``store.once(t, "final").call("RPUSH", key, item).run()`` is None when they
        already happened."""
        return Once(self.r, marker=self.keys.marker(turn_id, name), ttl_s=self.ttl_s,
                    fence=fence)

    def claim(self, turn_id: str, name: str, fence: Fence | None = None) -> bool:
        """True the first time ``name`` is claimed for this turn (a claim with no writes)."""
        return self.once(turn_id, name, fence).run() is not None

    # -- cancellation, deadline, end -----------------------------------------------------------
    def cancel(self, turn_id: str, reason: str = "cancelled by the caller") -> None:
        self.r.set(self.keys.cancel(turn_id), reason.encode(), ex=self.ttl_s)

    def cancelled(self, turn_id: str) -> bool:
        return bool(self.r.exists(self.keys.cancel(turn_id)))

    def ended(self, turn_id: str) -> bool:
        return bool(self.r.exists(self.keys.ended(turn_id)))

    def finish(self, spec: TurnSpec, status: str, error: tuple[ErrorCode | str, str] | None = None,
               data: Mapping[str, Any] | None = None, fence: Fence | None = None) -> bool:
        """End the turn once: an ``error`` event when given, then ``run-end``.

        False when it had already ended (nothing written). With a ``fence``, raises ``Fenced``
        (nothing written) when the writer is no longer its job's newest attempt.
        """
        k, events = self.keys, self.keys.events(spec.turn_id)
        now = time.time()
        # The end flag, the events and the bookkeeping in one script: a crash cannot leave a
        # turn ended without its run-end, nor a run-end without the session freed.
        once = Once(self.r, marker=k.ended(spec.turn_id), ttl_s=self.ttl_s,
                    marker_value=status.encode(), fence=fence)
        if error is not None:
            ev = TurnEvent(type="error", turn_id=spec.turn_id, ts=now,
                           data={"code": str(error[0]), "message": error[1]})
            once.call("XADD", events, "*", "e", ev.model_dump_json())
        end = TurnEvent(type="run-end", turn_id=spec.turn_id, ts=now, data={
            "status": status, "ms": round((now - spec.created_at) * 1000, 1), **(data or {})})
        once.call("XADD", events, "*", "e", end.model_dump_json())
        once.call("EXPIRE", events, self.ttl_s)
        once.call("ZREM", k.active_turns(), spec.turn_id)
        once.call("XADD", k.ended_turns(), "MAXLEN", "~", 10_000, "*",
                  "turn_id", spec.turn_id, "status", status)
        once.call("LPUSH", k.recent_turn_ms(), end.data["ms"])
        once.call("LTRIM", k.recent_turn_ms(), 0, 99)
        if spec.audio_key:
            once.call("DEL", spec.audio_key)
        once.call("DELIFEQ", k.session_lock(spec.session_id), spec.turn_id)
        if status != "ok":  # a yes counts only in the next turn: one that failed uses it up
            once.call("DEL", k.pending_action(spec.session_id))
        once.call("ZREM", k.session_waiting(spec.session_id), spec.turn_id)
        if (device := charged_device(spec)) is not None:  # it holds none of its characters
            once.call("ZREM", k.device_held(device, SPEAK_CHARS), spec.turn_id)
        return once.run() is not None

    def take_session(self, spec: TurnSpec, ttl_s: int) -> bool:
        """Give the session to this turn when it is free and no older turn of it is waiting.

        Turns of one session never interleave, and they reach the agent in the order they were
        created (a spoken turn asked first is answered first, even when its text comes later).
        """
        pipe = self.r.pipeline(transaction=False)
        self.take_session_in(pipe, spec, ttl_s)
        return bool(pipe.execute()[0])

    def take_session_in(self, pipe: Any, spec: TurnSpec, ttl_s: int) -> None:
        """``take_session`` as a command of ``pipe`` (its result: 1 taken, 0 busy), sent with
        the script's text so it needs no round trip of its own to load it."""
        pipe.eval(_TAKE_SESSION, 3, self.keys.session_lock(spec.session_id),
                  self.keys.session_waiting(spec.session_id), self.keys.active_turns(),
                  spec.turn_id, max(1, ttl_s))

    def release_session(self, session_id: str, turn_id: str, fence: Fence | None = None) -> None:
        """Free the session for its next turn, if this turn holds it; with a ``fence``, only
        while the writer is its job's newest attempt (else raises ``Fenced``: a woken zombie
        must not free the session while the attempt that took over still runs)."""
        if fence is None:
            self._release_lock(keys=[self.keys.session_lock(session_id)], args=[turn_id])
            return
        Once(self.r, fence=fence).call("DELIFEQ", self.keys.session_lock(session_id),
                                       turn_id).run()

    def overdue(self, now: float | None = None, limit: int = 100) -> list[str]:
        """Turns still active after their deadline."""
        when = time.time() if now is None else now
        ids: Any = self.r.zrangebyscore(self.keys.active_turns(), "-inf", when, start=0, num=limit)
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]


def _parse_entry(entry_id: bytes | str, fields: Mapping[bytes | str, bytes | str]) -> StreamEntry:
    def field(name: str) -> bytes | str | None:
        return fields.get(name.encode()) if name.encode() in fields else fields.get(name)

    raw = field("e")
    event = TurnEvent.model_validate_json(raw if raw is not None else "{}")
    pcm = field("pcm")
    return StreamEntry(
        id=entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
        event=event,
        pcm=pcm.encode() if isinstance(pcm, str) else pcm,
    )
