"""Reading a Redis stream for a long poll: what came after an id, waiting a while for it."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from voxqueue.contracts.gateway import Entries, WireEntry

#: Entries one answer carries at most (the next poll goes on from the last one).
PAGE = 200


async def read_after(r: aioredis.Redis, stream: str, after: str | None,
                     wait_ms: int) -> Entries:
    """Entries after ``after``, waiting up to ``wait_ms`` for the first one."""
    start = after or "0-0"
    answer: Any = await r.xread({stream: start}, count=PAGE, block=wait_ms or None)
    out: list[WireEntry] = []
    last = start
    for _key, items in answer or []:
        for entry_id, fields in items:
            last = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            out.append(_wire(last, fields))
    return Entries(entries=out, last_id=last)


def _wire(entry_id: str, fields: dict[bytes, bytes]) -> WireEntry:
    raw = fields.get(b"e", b"{}")
    try:
        event = json.loads(raw)
    except ValueError:
        event = {}
    return WireEntry.of(entry_id, event if isinstance(event, dict) else {}, fields.get(b"pcm"))
