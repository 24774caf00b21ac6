"""Taint and the spoken yes: once a session's history holds text others wrote, its side
effects run only after the person confirms them.

A tool with ``reads_untrusted`` (web pages, feeds, Wikipedia, MCP results, Home Assistant
state) and a monitor alert taint the turn (``vq:turn:<id>:untrusted``) and its session
(``vq:session:<id>:untrusted``, for as long as the history: the text stays in it, and an
injected "on the next turn, call ..." must not find an untainted turn). In a tainted turn a
side-effecting tool does not run: it is stored as pending for the session (tool and exact
arguments, ``VOXQUEUE_CONFIRM_TTL_S``) and the model is told to ask. A later turn of the
session whose whole utterance is a yes (:func:`workers.toolkit.policy.is_yes`) may run that
same call once; the entry is consumed atomically, so two copies of the call run one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from voxqueue.keys import Keys
from voxqueue.settings import Settings
from workers.toolkit.context import ToolCall
from workers.toolkit.policy import action_key, describe_action, is_yes
from workers.toolkit.taint import taint_writes

#: Actions pending per session at most (the oldest is dropped).
MAX_PENDING = 8

# KEYS: pending hash. ARGV: action, turn id, now. 1 when the action was pending from another
# turn and is now consumed.
_CONSUME = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local entry = cjson.decode(raw)
if tonumber(entry.expires) < tonumber(ARGV[3]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
if entry.turn == ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""

# KEYS: pending hash. ARGV: action, entry JSON, ttl, cap.
_REMEMBER = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
while #all / 2 > tonumber(ARGV[4]) do
  local oldest, when = nil, nil
  for i = 1, #all, 2 do
    local at = tonumber(cjson.decode(all[i + 1]).expires)
    if when == nil or at < when then oldest, when = all[i], at end
  end
  redis.call('HDEL', KEYS[1], oldest)
  all = redis.call('HGETALL', KEYS[1])
end
return 1
"""


@dataclass(frozen=True)
class TurnFacts:
    """What the guard knows of the call's turn."""

    text: str | None
    """The person's words this turn; None when the turn is unknown."""
    tainted: bool


def confirmation_needed(tool: str, arguments: dict[str, Any]) -> str:
    """What the model is told instead of a result when the action waits for a yes."""
    return (f"Not done: this needs the person's spoken confirmation first. Ask them: \"Should I "
            f"{describe_action(tool, arguments)}?\" It runs only after they say yes; then call "
            f"{tool} again with the same arguments.")


class TurnGuard:
    """Reads and writes a turn's taint and its session's pending actions."""

    def __init__(self, r: redis.Redis, keys: Keys, settings: Settings) -> None:
        self.r = r
        self.keys = keys
        self.settings = settings
        self._consume = r.register_script(_CONSUME)
        self._remember = r.register_script(_REMEMBER)

    def facts(self, call: ToolCall) -> TurnFacts:
        """The person's words this turn and whether the turn (or its session) is tainted."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hmget(self.keys.turn(call.turn_id), ["spec", "transcript"])
        pipe.exists(self.keys.turn_untrusted(call.turn_id),
                    self.keys.session_untrusted(call.session_id))
        (spec_raw, transcript), tainted = pipe.execute()
        text: str | None = None
        if spec_raw is not None:
            spec = json.loads(spec_raw)
            if spec.get("input") == "text":
                text = str(spec.get("text") or "")
            else:
                text = transcript.decode() if isinstance(transcript, bytes) else (transcript or "")
        return TurnFacts(text=text, tainted=bool(tainted))

    def taint(self, call: ToolCall, reason: str) -> None:
        """Mark the call's turn and session as having read untrusted content."""
        pipe = self.r.pipeline(transaction=True)
        for command in taint_writes(self.keys, self.settings, call.turn_id, call.session_id,
                                    reason):
            pipe.execute_command(*command)
        pipe.execute()

    def admit(self, call: ToolCall, facts: TurnFacts, tool: str,
              arguments: dict[str, Any]) -> str | None:
        """None when the side effect may run now; else the message for the model (and the
        action is stored as pending for the session's next yes)."""
        if not facts.tainted:
            return None
        action = action_key(tool, arguments)
        pending = self.keys.pending_actions(call.session_id)
        now = time.time()
        if facts.text is not None and is_yes(facts.text) and self._consume(
                keys=[pending], args=[action, call.turn_id, repr(now)]) == 1:
            return None
        entry = json.dumps({"turn": call.turn_id, "expires": now + self.settings.confirm_ttl_s})
        self._remember(keys=[pending],
                       args=[action, entry, self.settings.confirm_ttl_s, MAX_PENDING])
        return confirmation_needed(tool, arguments)
