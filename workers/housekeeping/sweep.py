"""Ending overdue turns: no lost task hangs a turn past its deadline."""

from __future__ import annotations

import structlog

from voxqueue.contracts import ErrorCode
from voxqueue.turns import TurnNotFound, TurnStore

log = structlog.get_logger("voxqueue.monitor")


def end_overdue(store: TurnStore, now: float | None = None) -> int:
    """End every active turn past its deadline at ``now`` (epoch seconds; default: the time)
    with a timeout error; returns how many ended here (a turn ends once, whoever else
    sweeps)."""
    ended = 0
    for turn_id in store.overdue(now):
        try:
            spec = store.spec(turn_id)
        except TurnNotFound:
            store.r.zrem(store.keys.active_turns(), turn_id)
            continue
        if store.finish(spec, "timeout", (ErrorCode.TIMEOUT, "no reply before the deadline")):
            log.warning("turn timed out", turn_id=turn_id, session_id=spec.session_id)
            ended += 1
        else:  # it had ended already: it is not active
            store.r.zrem(store.keys.active_turns(), turn_id)
    return ended
