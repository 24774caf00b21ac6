"""Timers and reminders in Redis, fired exactly once by whoever sweeps first.

A pending item is a member of a sorted set scored by its due time, with its JSON in a hash.
Firing claims due items and announces them in one Lua script: the ``ZREM`` that returns 1 is
the claim, and the ``XADD`` to the owner's announcement stream happens in the same atomic
step, so two sweepers never both fire an item, and a sweeper dying mid-way never loses one.
Nothing lives in a worker's memory: items survive worker and beat restarts.

An owner carries its kind: ``device:<name>`` items are announced on that device's stream,
``session:<id>`` ones on the session's own (never on a device that shares its name). Items
stored before, under a bare owner name, keep their stored keys and still fire; the device of
that name lists and cancels them too.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Literal, cast

import redis

from voxqueue.keys import Keys
from voxqueue.redis_conn import DurableScript

Kind = Literal["timer", "reminder"]
ANNOUNCE_MAXLEN = 1000
ANNOUNCE_TTL_S = 7 * 24 * 3600

# KEYS: due zset, items hash. ARGV: now, limit, maxlen, ttl.
_FIRE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local fired = {}
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local raw = redis.call('HGET', KEYS[2], id)
    redis.call('HDEL', KEYS[2], id)
    if raw then
      local item = cjson.decode(raw)
      redis.call('ZREM', item.owner_key, id)
      local event = cjson.encode({v = 1, type = 'announcement', kind = item.kind,
        text = item.announce, ts = tonumber(ARGV[1]), id = id, label = item.label,
        device = item.device or item.owner, due = item.due})
      redis.call('XADD', item.stream, 'MAXLEN', '~', ARGV[3], '*', 'e', event)
      redis.call('EXPIRE', item.stream, ARGV[4])
      table.insert(fired, raw)
    end
  end
end
return fired
"""

# KEYS: due zset, items hash, owner zset. ARGV: id.
_CANCEL = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[3], ARGV[1])
return 0
"""


@dataclass(frozen=True)
class Item:
    """A pending timer or reminder."""

    id: str
    kind: Kind
    owner: str
    label: str
    """The timer's name ("pasta") or the reminder's text ("call mum")."""
    announce: str
    """What the device hears when it fires."""
    due: float
    created: float
    owner_key: str
    stream: str
    duration_s: float | None = None
    device: str | None = None
    """The device that hears it (the owner's name for a device owner; else the owner)."""

    @property
    def left_s(self) -> float:
        return max(0.0, self.due - time.time())


class TimerStore:
    """Adds, lists, cancels and fires timers; ``r`` may or may not decode responses."""

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.r = r
        self.keys = keys
        # A firing and a cancellation are on the replicas before they are acted on: a failover
        # cannot make a timer fire twice, or fire after it was cancelled.
        self._fire = DurableScript(r, _FIRE, "a timer's firing")
        self._cancel = DurableScript(r, _CANCEL, "a timer's cancellation")

    def new(
        self,
        kind: Kind,
        owner: str,
        label: str,
        announce: str,
        due: float,
        duration_s: float | None = None,
    ) -> Item:
        """Store a new pending item and return it."""
        item = Item(
            id=uuid.uuid4().hex[:8],
            kind=kind,
            owner=owner,
            label=label,
            announce=announce,
            due=due,
            created=time.time(),
            owner_key=self.keys.owner_timers(owner),
            stream=self.stream_of(owner),
            duration_s=duration_s,
            device=owner.removeprefix("device:"),
        )
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.keys.timer_items(), item.id, json.dumps(asdict(item)))
        pipe.zadd(self.keys.owner_timers(owner), {item.id: due})
        pipe.zadd(self.keys.timers_due(), {item.id: due})
        # Wake the housekeeping loop, which may be sleeping past this item's due time.
        pipe.lpush(self.keys.timers_wake(), b"1")
        pipe.ltrim(self.keys.timers_wake(), 0, 0)
        pipe.execute()
        return item

    def stream_of(self, owner: str) -> str:
        """Where the owner hears its items: the device's stream, else the session's."""
        if owner.startswith("device:"):
            return self.keys.announcements(owner.removeprefix("device:"))
        if owner.startswith("session:"):
            return self.keys.session_announcements(owner.removeprefix("session:"))
        return self.keys.announcements(owner)  # a bare name, as stored before owner kinds

    def pending(self, owner: str) -> list[Item]:
        """The owner's items not fired yet, soonest first (a device's include those stored
        under its bare name before owners carried their kind)."""
        keys = [self.keys.owner_timers(owner)]
        if owner.startswith("device:"):
            keys.append(self.keys.owner_timers(owner.removeprefix("device:")))
        items: list[Item] = []
        for key in keys:
            ids = cast(list[bytes | str], self.r.zrange(key, 0, -1))
            if not ids:
                continue
            raws = self.r.hmget(self.keys.timer_items(), ids)
            items += [Item(**json.loads(raw)) for raw in raws if raw is not None]
            stale = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
            if stale:  # fired between the two reads
                self.r.zrem(key, *stale)
        return sorted(items, key=lambda i: i.due)

    def cancel(self, item: Item) -> bool:
        """Remove a pending item; False when it already fired (or was cancelled)."""
        keys = [self.keys.timers_due(), self.keys.timer_items(), item.owner_key]
        return bool(self._cancel(keys=keys, args=[item.id]))

    def fire_due(self, now: float | None = None, limit: int = 100) -> list[Item]:
        """Claim and announce every item due by ``now``; returns those this call fired."""
        when = time.time() if now is None else now
        raws = self._fire(
            keys=[self.keys.timers_due(), self.keys.timer_items()],
            args=[repr(when), limit, ANNOUNCE_MAXLEN, ANNOUNCE_TTL_S],
        )
        return [Item(**json.loads(raw)) for raw in raws or []]
