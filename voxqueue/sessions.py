"""Sessions in Redis: list them (with their token accounting), show one's history, clear them.

A session's history expires ``turns.session_ttl_s`` after its last change; listing forgets the ids
whose history has expired.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis

from voxqueue.keys import Keys
from voxqueue.settings import ClientSettings

#: A session id without history yet is kept this long after its last turn began (its first
#: turn may still be running).
GRACE_S = 300.0


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    last_used: float
    messages: int
    expires_in_s: int | None
    """Seconds before the history expires (None: no history)."""
    tokens: int | None
    """Tokens of the last request sent to the model."""
    summaries: int
    trims: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Sessions:
    def __init__(self, r: redis.Redis, keys: Keys, settings: ClientSettings) -> None:
        self.r = r
        self.keys = keys
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: ClientSettings) -> Sessions:
        from voxqueue.redis_conn import connect

        return cls(connect(settings), Keys(settings.redis.key_prefix), settings)

    def prune(self, now: float | None = None) -> int:
        """Forget ids whose history expired; returns how many were dropped."""
        now = time.time() if now is None else now
        dropped = int(
            self.r.zremrangebyscore(self.keys.sessions(), "-inf",
                                    now - self.settings.turns.session_ttl_s)
        )
        stale: Any = self.r.zrangebyscore(self.keys.sessions(), "-inf", now - GRACE_S)
        ids = [s.decode() if isinstance(s, bytes) else str(s) for s in stale]
        pipe = self.r.pipeline(transaction=False)
        for sid in ids:
            pipe.exists(self.keys.messages(sid))
        gone = [sid for sid, alive in zip(ids, pipe.execute(), strict=True) if not alive]
        if gone:
            dropped += int(self.r.zrem(self.keys.sessions(), *gone))
        return dropped

    def all(self) -> list[SessionInfo]:
        """Live sessions, most recently used first."""
        self.prune()
        entries: Any = self.r.zrevrange(self.keys.sessions(), 0, -1, withscores=True)
        pipe = self.r.pipeline(transaction=False)
        ids = []
        for raw, _score in entries:
            sid = raw.decode() if isinstance(raw, bytes) else str(raw)
            ids.append(sid)
            pipe.llen(self.keys.messages(sid))
            pipe.ttl(self.keys.messages(sid))
            pipe.hgetall(self.keys.context_stats(sid))
        answers = pipe.execute()
        found = []
        for i, (sid, (_raw, score)) in enumerate(zip(ids, entries, strict=True)):
            length, ttl, stats = answers[3 * i : 3 * i + 3]
            stats = _ints(stats)
            found.append(
                SessionInfo(
                    session_id=sid,
                    last_used=float(score),
                    messages=int(length),
                    expires_in_s=int(ttl) if int(ttl) >= 0 else None,
                    tokens=stats.get("tokens"),
                    summaries=stats.get("summaries", 0),
                    trims=stats.get("trims", 0),
                )
            )
        return found

    def history(self, session_id: str) -> list[dict[str, Any]] | None:
        """The session's messages (None when it has none, or they expired)."""
        items: Any = self.r.lrange(self.keys.messages(session_id), 0, -1)
        if not items:
            return None
        return [json.loads(item) for item in items]

    def clear(self, session_id: str) -> bool:
        """Delete the session's history, pending alerts and accounting (and with the history,
        its taint and the action waiting for a yes); True if it existed."""
        k = self.keys
        pipe = self.r.pipeline(transaction=True)
        pipe.zrem(k.sessions(), session_id)
        pipe.delete(k.messages(session_id), k.alerts(session_id), k.context_stats(session_id))
        pipe.delete(k.session_untrusted(session_id), k.pending_action(session_id),
                    k.session_links(session_id))
        removed, deleted, _ = pipe.execute()
        return bool(removed or deleted)

    def clear_all(self) -> int:
        """Clear every session; returns how many there were."""
        ids: Any = self.r.zrange(self.keys.sessions(), 0, -1)
        return sum(self.clear(s.decode() if isinstance(s, bytes) else str(s)) for s in ids)


def _ints(raw: dict[Any, Any]) -> dict[str, int]:
    """The numeric fields of a Redis hash."""
    found = {}
    for key, value in raw.items():
        text = value.decode() if isinstance(value, bytes) else str(value)
        if text.isdigit():
            found[key.decode() if isinstance(key, bytes) else str(key)] = int(text)
    return found
