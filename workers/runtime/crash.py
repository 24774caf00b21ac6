"""Crash points, as FoundationDB's BUGGIFY: named places between two effects where a test may
SIGKILL the process, to prove that a crash at that instant loses and doubles nothing.

The points are always in the code and cost one attribute check when disarmed. Only a test
setting arms them: ``VOXQUEUE_CRASH_AT=agent.after-send`` (a comma-separated list), or
``VOXQUEUE_CRASH_AT=plan``, which fires the point named in Redis for the turn's session
(``<prefix>:crash-plan:<session>``), so one running system can be crashed at a different point
per turn. A point fires at most once per turn; before dying it records where and when in
``<prefix>:crash-fired:<turn>`` (the test measures the takeover from it).
"""

from __future__ import annotations

import json
import os
import signal
import time

import structlog

from voxqueue.contracts import TurnSpec
from voxqueue.settings import Settings
from workers.runtime.resources import Runtime

log = structlog.get_logger("voxqueue.crash")

#: Every crash point, by stage; a name not listed here is a bug (tests enumerate these).
POINTS: dict[str, tuple[str, ...]] = {
    "stt": ("stt.after-claim", "stt.after-transcript", "stt.after-send"),
    "agent": ("agent.after-claim", "agent.after-open", "agent.mid-stream",
              "agent.before-answer", "agent.after-answer", "agent.after-history",
              "agent.after-send", "agent.after-results", "agent.after-reply",
              "agent.after-close"),
    "tools": ("tools.after-claim", "tools.after-effect-claim", "tools.after-run",
              "tools.after-record", "tools.after-join"),
    "tts": ("tts.after-claim", "tts.mid-stream", "tts.after-stream", "tts.before-finish",
            "tts.after-done"),
}
ALL_POINTS = frozenset(p for points in POINTS.values() for p in points)


def crash_point(rt: Runtime, name: str, spec: TurnSpec) -> None:
    """SIGKILL this process here when the test settings arm ``name`` for this turn."""
    armed = rt.settings.redis.crash_at
    if not armed:
        return
    if name not in ALL_POINTS:
        raise ValueError(f"unknown crash point {name!r}")
    if armed == "plan":
        planned = rt.redis.get(rt.keys.crash_plan(spec.session_id))
        if planned is None or bytes(planned).decode() != name:  # type: ignore[arg-type]
            return
    elif name not in {p.strip() for p in armed.split(",")}:
        return
    if not rt.redis.set(rt.keys.marker(spec.turn_id, f"crash:{name}"), b"1", nx=True,
                        ex=rt.settings.turns.ttl_s):
        return
    rt.redis.set(rt.keys.crash_fired(spec.turn_id), json.dumps(
        {"point": name, "ts": time.time(), "pid": os.getpid()}), ex=rt.settings.turns.ttl_s)
    os.kill(os.getpid(), signal.SIGKILL)


def warn_if_armed(settings: Settings) -> bool:
    """Log a loud warning when crash points are armed (a stray ``.env`` can do it): this
    process will SIGKILL itself at them. Returns whether they are."""
    if not settings.redis.crash_at:
        return False
    log.warning("CRASH POINTS ARMED: this worker SIGKILLs itself at them (tests only); unset "
                "VOXQUEUE_CRASH_AT (environment or .env) in production",
                crash_at=settings.redis.crash_at)
    return True
