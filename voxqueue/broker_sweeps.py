"""What any worker process may sweep, and whose turn it is: the in-flight lists of
:mod:`voxqueue.broker`'s channels (a dead channel's list goes back to its queue), and the one
process at a time that holds a sweep's turn."""

from __future__ import annotations

import time
from typing import Any

import redis

#: The set of every channel's in-flight list, and the lists' prefix.
INFLIGHT_INDEX = "_voxqueue.inflight"
_INFLIGHT = "_voxqueue.inflight."

# KEYS: the in-flight list, its alive key, its queue, the index. Its closing channel puts the
# list's messages back at the head of their queue (next to be taken).
_GIVE_BACK = """
local n = 0
while redis.call('lmove', KEYS[1], KEYS[3], 'RIGHT', 'RIGHT') do n = n + 1 end
redis.call('del', KEYS[2])
redis.call('srem', KEYS[4], KEYS[1])
return n
"""

#: Prefix of the keys naming the process that holds a sweep's turn (:func:`hold_sweep_turn_in`).
_SWEEP_TURN = "_voxqueue.sweep."

# KEYS[1]: the turn's key; ARGV: the caller, the hold in ms. The caller holds (or keeps) the
# turn unless another holds it (then 0).
_TAKE_TURN = """
local holder = redis.call('get', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
"""
_HOLD_TURN = _TAKE_TURN + "return 1"

# After _TAKE_TURN. KEYS[2]: the in-flight index, KEYS[3]: kombu's index of unacknowledged
# messages by delivery time; ARGV[3]: the in-flight lists' prefix, ARGV[4]: the time before
# which a delivery's lease has expired, ARGV[5]: how many expired ones to count at most.
# Returns {messages put back, expired deliveries}.
_SWEEP = _TAKE_TURN + """
local returned = 0
for _, list in ipairs(redis.call('smembers', KEYS[2])) do
  if redis.call('exists', list .. '.alive') == 0 then
    local queue = string.match(string.sub(list, #ARGV[3] + 1), '^(.+)%.[^.]*$')
    if queue then
      while redis.call('lmove', list, queue, 'RIGHT', 'RIGHT') do returned = returned + 1 end
    end
    redis.call('srem', KEYS[2], list)
  end
end
local expired = redis.call('zrange', KEYS[3], ARGV[4], 0, 'BYSCORE', 'REV', 'LIMIT', 0, ARGV[5])
return {returned, #expired}
"""


def hold_sweep_turn_in(pipe: Any, name: str, holder: str, hold_s: float) -> Any:
    """Whether ``holder`` has the turn for the sweep ``name`` (1 or 0): taken when free, renewed
    for ``hold_s`` when already its own. One process sweeps; the turn passes on only when its
    holder stops renewing it (dead, stopped or cut off from Redis) for ``hold_s``. Run by
    ``pipe`` (a pipeline: its reply is among the pipeline's; a client: the reply). Sent as
    ``EVAL``: a registered script in a pipeline would first ask ``SCRIPT EXISTS``, a round
    trip more."""
    return pipe.eval(_HOLD_TURN, 1, f"{_SWEEP_TURN}{name}", holder,
                     max(1, int(hold_s * 1000)))


def sweep(client: redis.Redis, holder: str, hold_s: float, *, unacked_index: str,
          lease_s: float, limit: int | None) -> tuple[int, int] | None:
    """One round trip of the sweeper (the turn ``"unacked"``, as :func:`hold_sweep_turn_in`):
    None when another process holds the turn; else the messages of dead channels' in-flight
    lists put back in their queues (a list is dead when its channel neither took a message nor
    waited for one for a lease), and how many deliveries in ``unacked_index`` outlived their
    lease (at most ``limit``, if given), for kombu's restore to put back."""
    reply = client.eval(_SWEEP, 3, f"{_SWEEP_TURN}unacked", INFLIGHT_INDEX, unacked_index,
                        holder, max(1, int(hold_s * 1000)), _INFLIGHT,
                        time.time() - lease_s, limit or -1)
    if not isinstance(reply, list):
        return None
    return int(reply[0]), int(reply[1])


def inflight_key(queue: str, channel_id: str) -> str:
    return f"{_INFLIGHT}{queue}.{channel_id}"


def give_back(client: redis.Redis, queue: str, channel_id: str) -> int:
    """A closing channel's own in-flight list back to its queue, at once; returns how many."""
    key = inflight_key(queue, channel_id)
    script = client.register_script(_GIVE_BACK)
    return int(script(keys=[key, f"{key}.alive", queue, INFLIGHT_INDEX]))
