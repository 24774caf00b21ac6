"""When a turn is complete: which sentences are to be spoken, which are done; the last one ends
the turn. Every stage that speaks or ends a turn goes through here.

Pieces of the reply (a sentence, or later sentences gathered: ``workers/agent/reply_sentences.py``)
get contiguous sequence numbers as they are produced (so a player knows what comes next); the number
of sentences is known only when the reply is complete (``close``). Whichever finishes last (the
final sentence's TTS task or the agent closing the reply) ends the turn. Each step is idempotent, so
an attempt that died half way is completed by the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from voxqueue.contracts import TurnEvent, TurnSpec
from voxqueue.once import Fence, Fenced
from voxqueue.turns import STREAM_MAXLEN
from workers.runtime.resources import Runtime


class Allocated(NamedTuple):
    """A piece's sequence number, whether this call made it, whether its TTS job was sent, and
    how many sentences it holds."""

    seq: int
    new: bool
    sent: bool
    sentences: int


# KEYS: turn hash, marker key, the step's list of sentences said ('' if none), the writer's
# fence ('' if none), then the device's budget counters the piece is charged to (none or more).
# ARGV: ttl, how many sentences the piece holds, the fence's attempt, the piece's characters,
# each counter's TTL, then the piece's sentences (pushed onto the list when the piece is new).
# Returns {seq, 1 if newly allocated else 0, 1 if its TTS job was sent else 0, how many
# sentences the piece holds (as first allocated: 1 for a marker written before pieces had more)},
# or {-1, 0, 0, 0} and writes nothing when the fence holds another attempt.
_ALLOCATE = """
if KEYS[4] ~= '' and redis.call('get', KEYS[4]) ~= ARGV[3] then return {-1, 0, 0, 0} end
local v = redis.call('get', KEYS[2])
if v then
  local seq, n = string.match(v, '^(%d+):?(%d*)$')
  return {tonumber(seq), 0, redis.call('hexists', KEYS[1], 'sent:' .. seq), tonumber(n) or 1}
end
local seq = redis.call('hincrby', KEYS[1], 'tts_sent', 1) - 1
redis.call('set', KEYS[2], seq .. ':' .. ARGV[2], 'EX', ARGV[1])
local n = #KEYS - 4
if KEYS[3] ~= '' and #ARGV > 4 + n then
  redis.call('rpush', KEYS[3], unpack(ARGV, 5 + n))
  redis.call('expire', KEYS[3], ARGV[1])
end
for i = 1, n do
  redis.call('incrbyfloat', KEYS[4 + i], ARGV[4])
  redis.call('expire', KEYS[4 + i], ARGV[4 + i])
end
return {seq, 1, 0, tonumber(ARGV[2])}
"""

# KEYS: turn hash, done set. ARGV: status ('ok' never replaces an error).
# Records how many sentences there are; returns {total, done, status}.
_CLOSE = """
local sent = redis.call('hget', KEYS[1], 'tts_sent') or 0
redis.call('hset', KEYS[1], 'tts_total', sent)
if ARGV[1] == 'ok' then redis.call('hsetnx', KEYS[1], 'tts_status', 'ok')
else redis.call('hset', KEYS[1], 'tts_status', ARGV[1]) end
return {tonumber(sent), redis.call('scard', KEYS[2]), redis.call('hget', KEYS[1], 'tts_status')}
"""

# KEYS: turn hash, done set, the job's fence ('' if none), its done marker ('' if none), the
# turn's event stream and ended flag (only with an event).
# ARGV: seq, ttl, attempt, then an event to append first (JSON) and the stream's cap.
# Returns {total or -1, done, status or ''}, or {-2, 0, ''} and writes nothing when a newer
# delivery of the job owns it (the fence holds another attempt).
_DONE = """
if KEYS[3] ~= '' and redis.call('get', KEYS[3]) ~= ARGV[3] then return {-2, 0, ''} end
if KEYS[5] and redis.call('exists', KEYS[6]) == 0 then
  redis.call('xadd', KEYS[5], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[4])
end
redis.call('sadd', KEYS[2], ARGV[1])
redis.call('expire', KEYS[2], ARGV[2])
if KEYS[4] ~= '' then redis.call('set', KEYS[4], '1', 'EX', ARGV[2]) end
local total = redis.call('hget', KEYS[1], 'tts_total')
return {tonumber(total or -1), redis.call('scard', KEYS[2]),
        redis.call('hget', KEYS[1], 'tts_status') or ''}
"""


def allocate(rt: Runtime, turn_id: str, name: str, sentences: int = 1, *,
             said: tuple[str, Sequence[str]] | None = None, fence: Fence | None = None,
             charge: tuple[Sequence[tuple[str, int]], int] | None = None) -> Allocated:
    """The sequence number of piece ``name`` (e.g. ``"2:0"``: step 2, from its first sentence),
    whether it was new, whether its TTS job was already sent, and how many sentences it holds.

    The same name always gets the same number and the same extent (the first caller's
    ``sentences``), so a redelivered step neither speaks twice nor cuts its pieces otherwise.
    ``said``: a list key and the piece's sentences, pushed onto it in the same step when the
    piece is new, so that no sentence is sent before it is recorded. ``charge``: a device's
    budget counters (``voxqueue.budgets.counters``, with their TTLs) and the piece's characters,
    counted on them in the same step when the piece is new (once, however often it is sent).
    With a ``fence``, raises ``Fenced`` (nothing written) when a newer attempt of the writing
    job has taken over.
    """
    key, texts = said if said is not None else ("", ())
    counters, chars = charge if charge is not None else ((), 0)
    keys = [rt.keys.turn(turn_id), rt.keys.marker(turn_id, f"seq:{name}"), key,
            fence.key if fence else "", *(k for k, _ in counters)]
    seq, new, sent, extent = rt.script(_ALLOCATE)(
        keys=keys, args=[rt.settings.turns.ttl_s, sentences, fence.attempt if fence else 0,
                         chars, *(ttl for _, ttl in counters), *texts])
    if int(seq) == -1:
        raise Fenced(f"turn {turn_id}: a newer attempt owns the piece {name}")
    return Allocated(int(seq), bool(new), bool(sent), int(extent))


def mark_sent(rt: Runtime, turn_id: str, seq: int) -> None:
    """The sentence's TTS job is on its queue (a step run again does not send it twice)."""
    rt.redis.hset(rt.keys.turn(turn_id), f"sent:{seq}", 1)


def close(rt: Runtime, spec: TurnSpec, end_status: str = "ok") -> None:
    """No more sentences will come: record how many there are, and end the turn if all are done.

    An ``error`` status (a spoken apology) sticks: a later close by the agent cannot undo it.
    """
    keys = [rt.keys.turn(spec.turn_id), rt.keys.tts_done(spec.turn_id)]
    total, done, status = rt.script(_CLOSE)(keys=keys, args=[end_status])
    _finish_if_complete(rt, spec, int(total), int(done), status)


def sentence_done(rt: Runtime, spec: TurnSpec, seq: int, *, fence: Fence | None = None,
                  job_done: str | None = None, event: TurnEvent | None = None,
                  before_finish: Callable[[], None] | None = None) -> bool:
    """Sentence ``seq`` is spoken (or will never be): end the turn if it was the last. With a
    ``fence``, only while that attempt is still the job's newest (False, nothing written,
    otherwise); ``job_done``, the job's done marker, is set in the same step, and ``event``
    (``tts-end``) appended just before, unless the turn has ended. ``before_finish`` runs
    between that step and the turn's end (a crash point): a copy of the job delivered after a
    death there finds it done and ends the turn (:func:`finish_if_spoken`)."""
    keys = [rt.keys.turn(spec.turn_id), rt.keys.tts_done(spec.turn_id),
            fence.key if fence else "", job_done or ""]
    args: list[Any] = [seq, rt.settings.turns.ttl_s, fence.attempt if fence else 0]
    if event is not None:
        keys += [rt.keys.events(spec.turn_id), rt.keys.ended(spec.turn_id)]
        args += [event.model_dump_json(), STREAM_MAXLEN]
    total, done, status = rt.script(_DONE)(keys=keys, args=args)
    if int(total) == -2:
        return False
    if before_finish is not None and 0 <= int(total) <= int(done):
        before_finish()
    _finish_if_complete(rt, spec, int(total), int(done), status)
    return True


def finish_if_spoken(rt: Runtime, spec: TurnSpec) -> None:
    """End the turn if every sentence is done and none will come: what the last sentence's
    job does after its done step, done again by a later copy of a job found done, in case the
    process died between the two."""
    pipe = rt.redis.pipeline(transaction=False)
    pipe.hget(rt.keys.turn(spec.turn_id), "tts_total")
    pipe.scard(rt.keys.tts_done(spec.turn_id))
    pipe.hget(rt.keys.turn(spec.turn_id), "tts_status")
    total, done, status = pipe.execute()
    _finish_if_complete(rt, spec, int(total) if total is not None else -1, int(done), status)


def _finish_if_complete(rt: Runtime, spec: TurnSpec, total: int, done: int, status: Any) -> None:
    if total >= 0 and done >= total:
        value = status.decode() if isinstance(status, bytes) else str(status or "ok")
        rt.store.finish(spec, value or "ok")
