"""What one device may use in a minute and in an hour, counted in Redis: the gateway refuses
what would go over (every replica shares the counters) and the workers count what a device's
turns had read aloud (its replies' characters) on the same counters.

A reply's length is known only as it is spoken, so a spoken turn holds ``Limit.held`` of its
device's budget (the longest reply, ``VOXQUEUE_REPLY_MAX_CHARS``) from the moment the gateway
lets it in until its reply is recorded or the turn ends (at the latest, its deadline): a device
whose budget, with the replies it has in flight, is used up is refused, so it goes over by less
than one reply, however many turns it starts at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

from voxqueue.contracts import TurnSpec
from voxqueue.keys import Keys

#: The budget of characters read aloud: ``/v1/speak`` and the replies of a device's turns.
SPEAK_CHARS = "speak-chars"
#: The windows every budget is counted in, in seconds: a minute and an hour.
SPANS = (60, 3600)

# Spend ``cost`` of a budget in each of its windows, or nothing when one would go over.
# KEYS: a counter per window, then the device's replies in flight (a sorted set: turn -> until
# when it holds; '' when the budget holds none). ARGV: cost, refuse (1: refuse over the limit;
# 0: count it all the same, for what was already taken), now, what one reply in flight holds,
# a turn to hold for ('' none) and until when, then per window: its limit, the counter's TTL and
# the seconds until it starts again. Returns 0 (spent) or the seconds to wait. A cost of 0 only
# asks whether the budget is used up already (replies in flight included).
_SPEND = """
local n = #KEYS - 1
local cost, now = tonumber(ARGV[1]), tonumber(ARGV[3])
local holds, held, soonest = KEYS[n + 1], 0, nil
if holds ~= '' then
  redis.call('zremrangebyscore', holds, '-inf', now)
  local first = redis.call('zrange', holds, 0, 0, 'WITHSCORES')
  if first[2] then soonest = tonumber(first[2]) end
  held = redis.call('zcard', holds) * tonumber(ARGV[4])
end
if ARGV[2] == '1' then
  for i = 1, n do
    local used, cap = tonumber(redis.call('get', KEYS[i]) or '0'), tonumber(ARGV[4 + 3 * i])
    if used + held + cost > cap or used + held >= cap then
      local wait = tonumber(ARGV[6 + 3 * i])
      if soonest and used + cost <= cap and used < cap then  -- over for the replies in flight
        wait = math.min(wait, math.max(1, math.ceil(soonest - now)))
      end
      return wait
    end
  end
end
if cost > 0 then
  for i = 1, n do
    redis.call('incrbyfloat', KEYS[i], cost)
    redis.call('expire', KEYS[i], ARGV[5 + 3 * i])
  end
end
if ARGV[5] ~= '' then
  redis.call('zadd', holds, ARGV[6], ARGV[5])
  local ttl = math.ceil(tonumber(ARGV[6]) - now) + 1
  if redis.call('ttl', holds) < ttl then redis.call('expire', holds, ttl) end
end
return 0
"""


@dataclass(frozen=True)
class Limit:
    """One budget of a device: ``what`` it counts, at most so much a minute and an hour;
    ``held``: what each spoken turn in flight holds of it (0: none)."""

    what: str
    unit: str
    per_minute: float
    per_hour: float
    held: float = 0


class OverBudget(Exception):
    """The device is over a budget: ``retry_after`` seconds until it may try again."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def counters(keys: Keys, device: str, what: str, now: float) -> list[tuple[str, int]]:
    """The counters of a device's budget for the windows ``now`` is in, each with its TTL
    (two of its windows)."""
    return [(keys.device_budget(device, what, span, int(now // span)), 2 * span)
            for span in SPANS]


def charged_device(spec: TurnSpec) -> str | None:
    """The device whose budgets a turn counts against: a gateway device's (its sessions are
    ``dev:<device>:<session>``, ``voxqueue.gateway.rules.session_of``); None for the rest."""
    device = spec.device
    return device if device and spec.session_id.startswith(f"dev:{device}:") else None


class Budgets:
    """Fixed windows of a minute and an hour per device and budget: shared, and bounded in
    memory (each counter expires after two of its windows; a hold, at its turn's deadline)."""

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.r = r
        self.keys = keys
        self._spend = r.register_script(_SPEND)

    def spend(self, device: str, limit: Limit, cost: float = 1, *, refuse: bool = True,
              hold: tuple[str, float] | None = None) -> None:
        """Count ``cost`` (and hold ``limit.held`` for ``hold``: a turn id and until when);
        :class:`OverBudget` when the device is over, and nothing is counted or held then."""
        now = time.time()
        keys = [key for key, _ in counters(self.keys, device, limit.what, now)]
        keys.append(self.keys.device_held(device, limit.what) if limit.held else "")
        member, until = hold if hold is not None and limit.held else ("", 0.0)
        args: list[float | int | str] = [cost, 1 if refuse else 0, now, limit.held, member,
                                         until]
        for span, cap in zip(SPANS, (limit.per_minute, limit.per_hour), strict=True):
            args += [cap, 2 * span, max(1, int((now // span + 1) * span - now) + 1)]
        retry_after = int(self._spend(keys=keys, args=args))
        if retry_after:
            held = (f"; each spoken turn holds {limit.held:g} until its reply is recorded"
                    if limit.held else "")
            raise OverBudget(f"this device used its {limit.what} budget ({limit.per_minute:g} "
                             f"{limit.unit} a minute, {limit.per_hour:g} an hour{held})",
                             retry_after)

    def release(self, device: str, limit: Limit, turn_id: str) -> None:
        """The turn holds nothing more of the device's budget (its reply ended, or it did)."""
        if limit.held:
            self.r.zrem(self.keys.device_held(device, limit.what), turn_id)
