"""What the system looks like from Redis and Celery: messages waiting per queue, live workers.

Read by the ``system_status`` tool and by the monitors that watch queues and workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxqueue.settings import QUEUES

if TYPE_CHECKING:
    from workers.runtime.resources import Runtime

# kombu's Redis transport keeps priorities 1-9 of a queue in lists named "<queue>\x06\x16<n>".
_PRIORITY_SEP = "\x06\x16"


def queue_depths(rt: Runtime) -> dict[str, int]:
    """Messages waiting in each queue (all priority lists added up)."""
    pipe = rt.redis.pipeline(transaction=False)
    for queue in QUEUES:
        pipe.llen(queue)
        for priority in range(1, 10):
            pipe.llen(f"{queue}{_PRIORITY_SEP}{priority}")
    counts = pipe.execute()
    step = 10
    return {q: sum(counts[i * step : (i + 1) * step]) for i, q in enumerate(QUEUES)}


def live_workers(rt: Runtime, timeout_s: float = 1.0) -> dict[str, int] | None:
    """Workers consuming each queue that answer within ``timeout_s`` (None when the broker
    could not be asked)."""
    try:
        inspect = rt.celery.control.inspect(timeout=timeout_s)
        replies = inspect.active_queues()
    except Exception:  # the status report must not fail for want of one part
        return None
    counts = dict.fromkeys(QUEUES, 0)
    for queues in (replies or {}).values():
        for queue in queues:
            name = queue.get("name")
            if name in counts:
                counts[name] += 1
    return counts
