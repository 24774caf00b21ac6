"""What one device may use: budgets per minute and per hour, counted in Redis so that every
gateway replica shares them, and connections in flight, counted by each gateway process."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import redis

from voxqueue.gateway.rules import Refused
from voxqueue.keys import Keys

# Spend ``cost`` of a budget in each of its windows, or nothing when one would go over.
# KEYS: a counter per window. ARGV: cost, refuse (1: refuse over the limit; 0: count it all
# the same, for what was already taken), then per window: its limit, the counter's TTL and the
# seconds until it starts again. Returns 0 (spent) or those seconds of the first full window.
# A cost of 0 only asks whether the budget is used up already.
_SPEND = """
local cost = tonumber(ARGV[1])
if ARGV[2] == '1' then
  for i, key in ipairs(KEYS) do
    local used = tonumber(redis.call('get', key) or '0')
    local cap = tonumber(ARGV[3 * i])
    if used + cost > cap or used >= cap then return tonumber(ARGV[3 * i + 2]) end
  end
end
if cost > 0 then
  for i, key in ipairs(KEYS) do
    redis.call('incrbyfloat', key, cost)
    redis.call('expire', key, ARGV[3 * i + 1])
  end
end
return 0
"""


@dataclass(frozen=True)
class Limit:
    """One budget of a device: ``what`` it counts, at most so much a minute and an hour."""

    what: str
    unit: str
    per_minute: float
    per_hour: float


class Budgets:
    """Fixed windows of a minute and an hour per device and budget: shared, and bounded in
    memory (each counter expires after two of its windows)."""

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.keys = keys
        self._spend = r.register_script(_SPEND)

    def spend(self, device: str, limit: Limit, cost: float = 1, *, refuse: bool = True) -> None:
        """Count ``cost``; :class:`Refused` (429, Retry-After) when the device is over."""
        now = time.time()
        spans = ((60, limit.per_minute), (3600, limit.per_hour))
        keys = [self.keys.device_budget(device, limit.what, span, int(now // span))
                for span, _ in spans]
        args: list[float | int] = [cost, 1 if refuse else 0]
        for span, cap in spans:
            args += [cap, 2 * span, max(1, int((now // span + 1) * span - now) + 1)]
        retry_after = int(self._spend(keys=keys, args=args))
        if retry_after:
            raise Refused(429, "rate-limited", f"this device used its {limit.what} budget "
                          f"({limit.per_minute:g} {limit.unit} a minute, {limit.per_hour:g} "
                          f"an hour)", {"Retry-After": str(retry_after)})


class InFlight:
    """Connections of one kind a device may hold at once, in this gateway process."""

    def __init__(self, kind: str, per_device: int) -> None:
        self.kind = kind
        self.per_device = per_device
        self.held: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, device: str) -> Iterator[None]:
        """Hold one for the block; :class:`Refused` (429) when the device holds them all."""
        if self.held.get(device, 0) >= self.per_device:
            raise Refused(429, "too-many-connections", f"this device has {self.per_device} "
                          f"{self.kind} open already", {"Retry-After": "1"})
        self.held[device] = self.held.get(device, 0) + 1
        try:
            yield
        finally:
            self.held[device] -= 1
            if not self.held[device]:
                del self.held[device]
