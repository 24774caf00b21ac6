"""What a test waits on in Redis: whether any task of a turn is still queued or running."""

from __future__ import annotations

from typing import Any

from voxqueue.broker.sweeps import INFLIGHT_INDEX

QUEUES = ("stt", "agent", "tools", "tts", "monitor")


def tasks_of_turn(r: Any, turn_id: str) -> list[str]:
    """Where task messages of the turn still are (a queue's name, an in-flight list being
    taken, ``unacked``: held by a worker, which acknowledges it when the task has run); empty
    once every stage of the turn has finished. Task ids begin with their turn's id."""
    mine = turn_id.encode()
    lists = [*QUEUES, *(k.decode() if isinstance(k, bytes) else str(k)
                        for k in r.smembers(INFLIGHT_INDEX))]
    found = [name for name in lists if any(mine in m for m in r.lrange(name, 0, -1))]
    if any(mine in v for v in r.hvals("unacked")):
        found.append("unacked")
    return found
