"""Reading a Redis stream for a long poll: what came after an id, waiting a while for it, in
slices so that a revoked device's poll ends within a slice; and forgetting a turn's reply audio
once its device has read it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from voxqueue.contracts.gateway import Entries, WireEntry

#: Entries one answer carries at most (the next poll goes on from the last one).
PAGE = 200

# A device that asks for what follows ``after`` has everything up to it: delete the audio
# chunks up to there but the turn's first (the metrics read when the first audio came); once
# the device was sent the turn's run-end, the stream expires soon.
# KEYS: the turn's events. ARGV: the id read up to ("" for none), the TTL ("0": keep it).
_FORGET_READ = """
if ARGV[1] ~= '' then
  local kept = false
  for _, entry in ipairs(redis.call('xrange', KEYS[1], '-', ARGV[1])) do
    local fields = entry[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'pcm' then
        if kept then redis.call('xdel', KEYS[1], entry[1]) end
        kept = true
      end
    end
  end
end
if ARGV[2] ~= '0' then
  local ttl = redis.call('ttl', KEYS[1])
  if ttl > tonumber(ARGV[2]) then redis.call('expire', KEYS[1], ARGV[2]) end
end
return 0
"""


async def read_after(r: aioredis.Redis, stream: str, after: str | None, wait_ms: int,
                     still_allowed: Callable[[], Awaitable[None]] | None = None,
                     slice_ms: int = 500) -> Entries:
    """Entries after ``after``, waiting up to ``wait_ms`` for the first one; between slices
    of ``slice_ms``, ``still_allowed`` raises when the reader may no longer wait."""
    start = after or "0-0"
    waited = 0
    while True:
        block = min(slice_ms, wait_ms - waited)
        answer: Any = await r.xread({stream: start}, count=PAGE,
                                    block=block if block > 0 else None)
        waited += max(block, 0)
        if answer or waited >= wait_ms:
            break
        if still_allowed is not None:
            await still_allowed()
    out: list[WireEntry] = []
    last = start
    for _key, items in answer or []:
        for entry_id, fields in items:
            last = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            out.append(_wire(last, fields))
    return Entries(entries=out, last_id=last)


async def forget_read(r: aioredis.Redis, stream: str, after: str | None, ended: bool,
                      ttl_s: int) -> None:
    """The reply audio a device has read (up to ``after``) is deleted; once it was sent the
    turn's end, the turn's stream expires in ``ttl_s``."""
    upto = "" if after in (None, "0", "0-0") else after
    if upto or ended:
        await r.eval(_FORGET_READ, 1, stream, upto or "", ttl_s if ended else 0)


def _wire(entry_id: str, fields: dict[bytes, bytes]) -> WireEntry:
    raw = fields.get(b"e", b"{}")
    try:
        event = json.loads(raw)
    except ValueError:
        event = {}
    return WireEntry.of(entry_id, event if isinstance(event, dict) else {}, fields.get(b"pcm"))
