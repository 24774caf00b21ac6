"""Which sentences of a turn are to be spoken and which are done; the last one ends the turn.

Sentences get contiguous sequence numbers as they are produced (so a player knows what comes
next); the number of sentences is known only when the reply is complete (``close``). Whichever
finishes last — the final sentence's TTS task or the agent closing the reply — ends the turn.
"""

from __future__ import annotations

from typing import Any

from voxqueue.contracts import TurnSpec
from workers.runtime.resources import Runtime

# KEYS: turn hash, marker key. ARGV: ttl. Returns {seq, 1 if newly allocated else 0}.
_ALLOCATE = """
local seq = redis.call('get', KEYS[2])
if seq then return {tonumber(seq), 0} end
seq = redis.call('hincrby', KEYS[1], 'tts_sent', 1) - 1
redis.call('set', KEYS[2], seq, 'EX', ARGV[1])
return {seq, 1}
"""


def allocate(rt: Runtime, turn_id: str, name: str) -> tuple[int, bool]:
    """The sequence number of sentence ``name`` (e.g. ``"2:0"``: step 2, first sentence).

    The same name always gets the same number, so a redelivered step does not speak twice.
    """
    keys = [rt.keys.turn(turn_id), rt.keys.marker(turn_id, f"seq:{name}")]
    seq, new = rt.script(_ALLOCATE)(keys=keys, args=[rt.settings.turn_ttl_s])
    return int(seq), bool(new)


def close(rt: Runtime, spec: TurnSpec, end_status: str = "ok") -> None:
    """No more sentences will come: record how many there are, and end the turn if all are done.

    An ``error`` status (a spoken apology) sticks: a later close by the agent cannot undo it.
    """
    key = rt.keys.turn(spec.turn_id)
    sent: Any = rt.redis.hget(key, "tts_sent")
    pipe = rt.redis.pipeline(transaction=True)
    pipe.hset(key, "tts_total", int(sent or 0))
    if end_status == "ok":
        pipe.hsetnx(key, "tts_status", end_status)
    else:
        pipe.hset(key, "tts_status", end_status)
    pipe.execute()
    maybe_finish(rt, spec)


def sentence_done(rt: Runtime, spec: TurnSpec, seq: int) -> None:
    done = rt.keys.tts_done(spec.turn_id)
    pipe = rt.redis.pipeline(transaction=True)
    pipe.sadd(done, seq)
    pipe.expire(done, rt.settings.turn_ttl_s)
    pipe.execute()
    maybe_finish(rt, spec)


def maybe_finish(rt: Runtime, spec: TurnSpec) -> None:
    pipe = rt.redis.pipeline(transaction=True)
    pipe.hmget(rt.keys.turn(spec.turn_id), ["tts_total", "tts_status"])
    pipe.scard(rt.keys.tts_done(spec.turn_id))
    (total, status), done = pipe.execute()
    if total is not None and int(done) >= int(total):
        rt.store.finish(spec, (status or b"ok").decode())
