"""What any worker process may sweep, and whose turn it is: the in-flight lists of
:mod:`voxqueue.broker.transport`'s channels (a dead channel's list goes back to its queue), and
the one process at a time that holds a sweep's turn.

Leases are measured on Redis's clock, never a host's: a delivery's lease is stamped
(:func:`stamp_leases`) and judged expired (:func:`sweep`) with ``TIME`` inside the scripts, so
a worker whose clock is behind the sweeper's does not see its running tasks handed out again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from voxqueue.broker.take import BELL, BELL_TTL_MS, RING_LUA, bell_key

#: The set of every channel's in-flight list, and the lists' prefix.
INFLIGHT_INDEX = "_voxqueue.inflight"
_INFLIGHT = "_voxqueue.inflight."

# KEYS: the in-flight list, its alive key, its queue, the index, the queue's doorbell; ARGV[1]:
# the bell's TTL. Its closing channel puts the list's messages back at the head of their queue
# (next to be taken), and rings.
_GIVE_BACK = """
local n = 0
while redis.call('lmove', KEYS[1], KEYS[3], 'RIGHT', 'RIGHT') do n = n + 1 end
redis.call('del', KEYS[2])
redis.call('srem', KEYS[4], KEYS[1])
if n > 0 then """ + RING_LUA.format(bell="KEYS[5]", ttl="ARGV[1]") + """ end
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

# KEYS[1]: the turn's key; ARGV[1]: the caller. Frees the turn if the caller holds it (1).
_RELEASE_TURN = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('del', KEYS[1])
"""

# Redis's time now, in seconds, as a string with microseconds (a score of kombu's index).
_NOW = """
local t = redis.call('time')
local now = t[1] .. '.' .. string.format('%06d', t[2])
"""

# KEYS[1]: kombu's index of unacknowledged messages by delivery time; ARGV[1]: 'XX' (renew
# only those still there: one acknowledged meanwhile is not put back), else add; the rest:
# delivery tags. Scores them all with Redis's time; returns how many.
_STAMP = _NOW + """
local n = 0
for i = 2, #ARGV do
  if ARGV[1] == 'XX' then
    n = n + redis.call('zadd', KEYS[1], 'XX', 'CH', now, ARGV[i])
  else
    redis.call('zadd', KEYS[1], now, ARGV[i])
    n = n + 1
  end
end
return n
"""

# After _TAKE_TURN. KEYS[2]: the in-flight index, KEYS[3]: kombu's index of unacknowledged
# messages by delivery time; ARGV[3]: the in-flight lists' prefix, ARGV[4]: the lease in
# seconds, ARGV[5]: how many expired ones to count at most, ARGV[6]: the doorbells' prefix,
# ARGV[7]: their TTL. Returns {messages put back, expired deliveries, the time (Redis's) at or
# before which a delivery's lease has expired}.
_SWEEP = _TAKE_TURN + _NOW + """
local ceiling = string.format('%.6f', tonumber(now) - tonumber(ARGV[4]))
local returned = 0
for _, list in ipairs(redis.call('smembers', KEYS[2])) do
  if redis.call('exists', list .. '.alive') == 0 then
    local queue = string.match(string.sub(list, #ARGV[3] + 1), '^(.+)%.[^.]*$')
    if queue then
      local n = 0
      while redis.call('lmove', list, queue, 'RIGHT', 'RIGHT') do n = n + 1 end
      if n > 0 then """ + RING_LUA.format(bell="ARGV[6] .. queue", ttl="ARGV[7]") + """ end
      returned = returned + n
    end
    redis.call('srem', KEYS[2], list)
  end
end
local expired = redis.call('zrange', KEYS[3], ceiling, 0, 'BYSCORE', 'REV', 'LIMIT', 0, ARGV[5])
return {returned, #expired, ceiling}
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


def release_sweep_turn(client: redis.Redis, name: str, holder: str) -> bool:
    """Free the turn for the sweep ``name`` if ``holder`` holds it (a clean stop: the next
    process need not wait for it to lapse); whether it did."""
    return bool(client.eval(_RELEASE_TURN, 1, f"{_SWEEP_TURN}{name}", holder))


def sweep_turn_holder(client: redis.Redis, name: str) -> str | None:
    """Who holds the turn for the sweep ``name`` now (None: nobody)."""
    held = client.get(f"{_SWEEP_TURN}{name}")
    return None if held is None else bytes(held).decode(errors="replace")  # type: ignore[arg-type]


def sweep(client: redis.Redis, holder: str, hold_s: float, *, unacked_index: str,
          lease_s: float, limit: int | None) -> tuple[int, int, float] | None:
    """One round trip of the sweeper (the turn ``"unacked"``, as :func:`hold_sweep_turn_in`):
    None when another process holds the turn; else the messages of dead channels' in-flight
    lists put back in their queues (a list is dead when its channel neither took a message nor
    waited for one for a lease), how many deliveries in ``unacked_index`` outlived their
    lease (at most ``limit``, if given), and the score (Redis's time less a lease) at or below
    which a delivery had, for the restore to put them back."""
    reply = client.eval(_SWEEP, 3, f"{_SWEEP_TURN}unacked", INFLIGHT_INDEX, unacked_index,
                        holder, max(1, int(hold_s * 1000)), _INFLIGHT, lease_s, limit or -1,
                        BELL, BELL_TTL_MS)
    if not isinstance(reply, list):
        return None
    return int(reply[0]), int(reply[1]), float(reply[2])


def stamp_leases(client: Any, unacked_index: str, tags: Iterable[str], *,
                 renew: bool) -> Any:
    """Score deliveries in kombu's ``unacked_index`` with Redis's time now: a new delivery
    (``renew=False``), or a renewal of those still there (``renew=True``; one acknowledged
    meanwhile is not put back). Run by ``client`` (a pipeline: its reply, how many, is among
    the pipeline's); ``unacked_index`` with its global key prefix, if any (kombu adds none to
    ``EVAL``)."""
    return client.eval(_STAMP, 1, unacked_index, "XX" if renew else "ADD", *tags)


def restore_expired(qos: Any, ceiling: float, num: int | None) -> None:
    """kombu's restore of expired leases (``QoS.restore_visible``), judged on Redis's clock as
    :func:`sweep` judged them (kombu compares with this host's clock, so a worker whose clock
    is behind would have its running tasks handed out): under kombu's mutex, each delivery of
    ``qos`` scored at or below ``ceiling`` goes back to its queue, unless renewed or
    acknowledged since."""
    with qos.channel.conn_or_acquire() as client:
        try:
            with kombu_redis.Mutex(client, qos.unacked_mutex_key, qos.unacked_mutex_expire):
                for tag in client.zrange(qos.unacked_index_key, ceiling, 0, desc=True,
                                         byscore=True, offset=0 if num else None,
                                         num=num or None):
                    _restore_if_expired(qos, client, tag, ceiling)
        except kombu_redis.MutexHeld:
            pass


def _restore_if_expired(qos: Any, client: Any, tag: Any, ceiling: float) -> None:
    """kombu's ``restore_by_tag``, done only if the delivery's lease is still expired."""

    def restore(pipe: Any) -> None:  # (kombu prefixes a global key prefix but on ZSCORE)
        score = pipe.zscore(f"{qos.channel.global_keyprefix or ''}{qos.unacked_index_key}", tag)
        raw = pipe.hget(qos.unacked_key, tag)
        pipe.multi()
        if score is None or score > ceiling:
            return  # acknowledged, or renewed since the sweep
        qos._remove_from_indices(tag, pipe)
        if raw:
            body, exchange, routing_key = loads(bytes_to_str(raw))
            qos.channel._do_restore_message(body, exchange, routing_key, pipe, False)

    client.transaction(restore, qos.unacked_key, qos.unacked_index_key)


def inflight_key(queue: str, channel_id: str) -> str:
    """The in-flight list of ``channel_id`` (no dots in it: the sweep finds ``queue`` as what
    comes before the last dot) for the list ``queue``."""
    return f"{_INFLIGHT}{queue}.{channel_id}"


def give_back(client: redis.Redis, queue: str, channel_id: str) -> int:
    """A closing channel's own in-flight list back to its queue, at once; returns how many."""
    key = inflight_key(queue, channel_id)
    script = client.register_script(_GIVE_BACK)
    return int(script(keys=[key, f"{key}.alive", queue, INFLIGHT_INDEX, bell_key(queue)],
                      args=[BELL_TTL_MS]))
