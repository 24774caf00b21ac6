"""Alerts on a change of state, never on every check.

One Lua script records a check's outcome and, when the state changed, pushes the alert and
(for an urgent failure) announces it on the device, in one atomic step: two checks of the same
monitor racing each other, or a beat restarted mid-way, never alert twice for one change.
The first check of a monitor alerts only when it is not ok; a monitor deleted while its check
ran records nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis

from voxqueue.keys import Keys
from voxqueue.redis_conn import DurableScript
from workers.monitor.checks import CheckResult
from workers.monitor.monitors import Monitor

ALERTS_MAX = 50
ANNOUNCE_MAXLEN = 1000

# KEYS: state hash, alert list, announcement stream, monitor definitions hash.
# ARGV: new state, now, value JSON, detail, alert text, "1" to push it to the list,
#       announcement JSON ("" none), ttl seconds, alert list cap, stream maxlen, name.
_RECORD = """
if redis.call('HEXISTS', KEYS[4], ARGV[11]) == 0 then return {'deleted', 0} end
local old = redis.call('HGET', KEYS[1], 'state') or 'unknown'
redis.call('HSET', KEYS[1], 'checked_at', ARGV[2], 'value', ARGV[3], 'detail', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'checks', 1)
if old == ARGV[1] then return {old, 0} end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'since', ARGV[2])
if old == 'unknown' and ARGV[1] == 'ok' then return {old, 0} end
redis.call('HINCRBY', KEYS[1], 'alerts', 1)
redis.call('HSET', KEYS[1], 'last_alert', ARGV[5], 'last_alert_at', ARGV[2])
if ARGV[6] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[5])
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[9]), -1)
  redis.call('EXPIRE', KEYS[2], ARGV[8])
end
if ARGV[7] ~= '' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[10], '*', 'e', ARGV[7])
  redis.call('EXPIRE', KEYS[3], ARGV[8])
end
return {old, 1}
"""


@dataclass(frozen=True)
class Transition:
    old: str
    new: str
    alerted: bool
    text: str


def alert_text(monitor: Monitor, result: CheckResult) -> str:
    """What the person is told when the monitor enters ``result.state``."""
    if result.state == "alerting":
        return f"{monitor.label} needs attention: {result.detail}."
    if result.state == "ok":
        return f"{monitor.label} is back to normal: {result.detail}."
    return f"{monitor.label} cannot be checked: {result.detail}."


def announcement(text: str, monitor: Monitor, state: str, ts: float) -> str:
    """The JSON of an announcement event on a device's stream."""
    return json.dumps(
        {
            "v": 1,
            "type": "announcement",
            "kind": "alert",
            "text": text,
            "ts": ts,
            "monitor": monitor.name,
            "state": state,
        }
    )


class Alerter:
    """Records check results and raises alerts on state changes."""

    def __init__(self, r: redis.Redis, keys: Keys, ttl_s: int) -> None:
        self.r = r
        self.keys = keys
        self.ttl_s = ttl_s
        # On the replicas before the alert is raised: a failover cannot raise it twice.
        self._record = DurableScript(r, _RECORD, "a monitor's check result")

    def alert_list(self, monitor: Monitor) -> str | None:
        """Where alerts wait for the next turn: the device's list, else the session's."""
        if monitor.device:
            return self.keys.device_alerts(monitor.device)
        if monitor.session_id:
            return self.keys.alerts(monitor.session_id)
        return None

    def record(self, monitor: Monitor, result: CheckResult) -> Transition:
        now = time.time()
        text = alert_text(monitor, result)
        state_key = self.keys.monitor_state(monitor.name)
        alerts = self.alert_list(monitor)
        urgent = monitor.urgent and monitor.device is not None and result.state == "alerting"
        stream = self.keys.announcements(monitor.device) if urgent and monitor.device else None
        old, alerted = self._record(
            keys=[state_key, alerts or state_key, stream or state_key, self.keys.monitors()],
            args=[
                result.state,
                repr(now),
                json.dumps(result.value),
                result.detail,
                text,
                "1" if alerts else "",
                announcement(text, monitor, result.state, now) if stream else "",
                self.ttl_s,
                ALERTS_MAX,
                ANNOUNCE_MAXLEN,
                monitor.name,
            ],
        )
        old_state = old.decode() if isinstance(old, bytes) else str(old)
        return Transition(old_state, result.state, bool(alerted), text)
