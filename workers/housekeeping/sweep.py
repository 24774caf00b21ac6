"""Beat's sweep: end the turns that passed their deadline (no lost task hangs a turn)."""

from __future__ import annotations

import structlog
from celery import Task

from voxqueue.celery_config import MONITOR_SWEEP, TIME_LIMITS
from voxqueue.contracts import ErrorCode
from voxqueue.turns import TurnNotFound
from workers.app import app
from workers.runtime.stage import runtime_of

log = structlog.get_logger("voxqueue.monitor")


@app.task(name=MONITOR_SWEEP, bind=True, time_limit=TIME_LIMITS["monitor"], expires=10)
def sweep_turns(self: Task) -> int:
    """End every active turn past its deadline with a timeout error: no lost task hangs a turn."""
    store = runtime_of(self).store
    ended = 0
    for turn_id in store.overdue():
        try:
            spec = store.spec(turn_id)
        except TurnNotFound:
            store.r.zrem(store.keys.active_turns(), turn_id)
            continue
        if store.finish(spec, "timeout", (ErrorCode.TIMEOUT, "no reply before the deadline")):
            log.warning("turn timed out", turn_id=turn_id, session_id=spec.session_id)
            ended += 1
    return ended
