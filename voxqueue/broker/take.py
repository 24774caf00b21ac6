"""The commands of :mod:`voxqueue.broker.transport`'s take from several lists, its doorbells, and
the test-only crash point after a take.

``BLMOVE`` waits on one list only. A channel that consumes several (several queues, or one
queue's priority lists) alternates two commands instead: :data:`TAKE_ANY`, a script that moves
the first item of the first non-empty list (in the channel's order) into that list's in-flight
list of the channel and returns it, or, when every list is empty, returns the last id of each
list's doorbell stream; then ``XREAD BLOCK`` on the doorbells from those ids. Every publish
(``Channel._put``) and every sweep that puts messages back rings its list's doorbell in the same
round trip as its push, so a message pushed after the script wakes the reader at once; one
pushed without a ring (by another client) is found by the next script, within a take's wait.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

#: Prefix of the doorbell streams (one per list); a bell keeps one entry and expires when
#: nothing is published for this long (a reader that waits on a missing bell reads from 0).
BELL = "_voxqueue.bell."
BELL_TTL_MS = 600_000

# KEYS: the n lists (in the order to take from), their n in-flight lists, their n bells.
# Returns {i, item} for an item taken from KEYS[i], else the last id of each bell.
_TAKE_ANY = """
local n = #KEYS / 3
for i = 1, n do
  local item = redis.call('lmove', KEYS[i], KEYS[n + i], 'RIGHT', 'LEFT')
  if item then return {i, item} end
end
local ids = {}
for i = 1, n do
  local last = redis.call('xrevrange', KEYS[2 * n + i], '+', '-', 'COUNT', 1)
  ids[i] = last[1] and last[1][1] or '0-0'
end
return ids
"""

#: Ring a bell from a script: KEYS/ARGV-free, ``bell`` and ``ttl`` being Lua expressions.
RING_LUA = ("redis.call('xadd', {bell}, 'MAXLEN', 1, '*', 'r', 1) "
            "redis.call('pexpire', {bell}, {ttl})")


def bell_key(list_name: str) -> str:
    return BELL + list_name


def ring_commands(list_name: str) -> list[tuple[Any, ...]]:
    """The commands that ring ``list_name``'s doorbell (for a pipeline or a publish batch)."""
    bell = bell_key(list_name)
    return [("xadd", bell, {"r": "1"}, "*", 1, False), ("pexpire", bell, BELL_TTL_MS)]


def take_any_command(lists: list[str], inflight: list[str]) -> list[Any]:
    """The ``EVAL`` of :data:`_TAKE_ANY` (sent whole: ``EVALSHA`` would need a second try
    after a restart of Redis)."""
    keys = [*lists, *inflight, *(bell_key(name) for name in lists)]
    return ["EVAL", _TAKE_ANY, len(keys), *keys]


def taken(reply: Any) -> tuple[int, bytes] | None:
    """(index of the list, item) from a reply of :data:`_TAKE_ANY`; None when it found none."""
    if reply and isinstance(reply[0], int):
        return reply[0] - 1, reply[1]
    return None


def wait_command(lists: list[str], ids: list[Any], wait_s: float) -> list[Any]:
    """``XREAD BLOCK`` on the doorbells of ``lists`` from ``ids``, for at most ``wait_s``."""
    return ["XREAD", "BLOCK", max(1, int(wait_s * 1000)), "STREAMS",
            *(bell_key(name) for name in lists), *ids]


# -- the test-only crash point (as workers/runtime/crash.py's) --------------------------------
#: A broker-level crash point: right after a take's reply is read, before kombu records the
#: delivery. Armed only by ``VOXQUEUE_CRASH_AT`` naming it (read once, at import: disarmed, it
#: costs one test of a module constant per take); then each take decrements
#: :data:`CRASH_COUNTDOWN` and the take that brings it to 0 SIGKILLs its process (a test sets
#: the countdown to choose when), after adding a line to :data:`CRASH_FIRED`.
AFTER_TAKE = "broker.after-take"
CRASH_COUNTDOWN = "_voxqueue.crash-countdown." + AFTER_TAKE
CRASH_FIRED = "_voxqueue.crash-fired." + AFTER_TAKE
ARMED = AFTER_TAKE in {p.strip() for p in os.environ.get("VOXQUEUE_CRASH_AT", "").split(",")}


def crash_after_take(client: Any, list_name: str) -> None:
    """SIGKILL this process when the countdown reaches 0 at this take (only when armed)."""
    if int(client.decr(CRASH_COUNTDOWN)) != 0:
        return
    client.rpush(CRASH_FIRED, json.dumps({"point": AFTER_TAKE, "list": list_name,
                                          "pid": os.getpid(), "ts": time.time()}))
    os.kill(os.getpid(), signal.SIGKILL)
