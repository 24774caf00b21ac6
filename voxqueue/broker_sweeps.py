"""What any worker process may sweep, and whose turn it is: the in-flight lists of
:mod:`voxqueue.broker`'s channels (a dead channel's list goes back to its queue), and the one
process at a time that holds a sweep's turn."""

from __future__ import annotations

from typing import Any

import redis
from kombu.utils.encoding import bytes_to_str

#: The set of every channel's in-flight list, and the lists' prefix.
INFLIGHT_INDEX = "_voxqueue.inflight"
_INFLIGHT = "_voxqueue.inflight."

# KEYS: the in-flight list, its alive key, its queue, the index; ARGV[1] "closing" when the
# list's own channel gives it back. Puts the list's messages back at the head of their queue
# (next to be taken) unless its channel is alive (or is the caller).
_RETURN_ORPHANS = """
if ARGV[1] ~= 'closing' and redis.call('exists', KEYS[2]) == 1 then return -1 end
local n = 0
while redis.call('lmove', KEYS[1], KEYS[3], 'RIGHT', 'RIGHT') do n = n + 1 end
redis.call('del', KEYS[2])
redis.call('srem', KEYS[4], KEYS[1])
return n
"""

#: Prefix of the keys naming the process that holds a sweep's turn (:func:`hold_sweep_turn`).
_SWEEP_TURN = "_voxqueue.sweep."

# KEYS: the turn's key; ARGV: the caller, the hold in ms. The caller holds (or keeps) the turn
# unless another holds it.
_HOLD_TURN = """
local holder = redis.call('get', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
return 1
"""


def hold_sweep_turn(client: redis.Redis, name: str, holder: str, hold_s: float) -> bool:
    """True when ``holder`` has the turn for the sweep ``name``: taken when free, renewed for
    ``hold_s`` when already its own. One process sweeps; the turn passes on only when its holder
    stops renewing it (dead, stopped or cut off from Redis) for ``hold_s``."""
    return bool(hold_sweep_turn_in(client, name, holder, hold_s))


def hold_sweep_turn_in(pipe: Any, name: str, holder: str, hold_s: float) -> Any:
    """:func:`hold_sweep_turn` run by ``pipe`` (a pipeline: its reply is among the pipeline's,
    1 or 0; a client: the reply). Sent as ``EVAL``: a registered script in a pipeline
    would first ask ``SCRIPT EXISTS``, a round trip more."""
    return pipe.eval(_HOLD_TURN, 1, f"{_SWEEP_TURN}{name}", holder,
                     max(1, int(hold_s * 1000)))


def inflight_key(queue: str, channel_id: str) -> str:
    return f"{_INFLIGHT}{queue}.{channel_id}"


def return_orphans(client: redis.Redis) -> int:
    """Put back in their queues the messages of every in-flight list whose channel is dead
    (it did not take a message, nor wait for one, for a lease). Returns how many."""
    keys = [bytes_to_str(raw) for raw in client.smembers(INFLIGHT_INDEX)]
    if not keys:
        return 0
    pipe = client.pipeline(transaction=False)
    for key in keys:  # one round trip for all; the script checks again, atomically
        pipe.exists(f"{key}.alive")
    dead = [key for key, alive in zip(keys, pipe.execute(), strict=True) if not alive]
    returned = 0
    script = client.register_script(_RETURN_ORPHANS)
    for key in dead:
        queue = key[len(_INFLIGHT):].rsplit(".", 1)[0]
        n = int(script(keys=[key, f"{key}.alive", queue, INFLIGHT_INDEX], args=["sweep"]))
        returned += max(0, n)
    return returned


def give_back(client: redis.Redis, queue: str, channel_id: str) -> int:
    """A closing channel's own in-flight list back to its queue, at once; returns how many."""
    key = inflight_key(queue, channel_id)
    script = client.register_script(_RETURN_ORPHANS)
    return int(script(keys=[key, f"{key}.alive", queue, INFLIGHT_INDEX], args=["closing"]))
