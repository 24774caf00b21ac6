"""Queue items that are not messages go to a dead-letter list, never back to their queue.

A non-JSON item on a queue (a bug, an operator's ``redis-cli LPUSH``, another program on the same
database), or JSON that kombu cannot deliver as a message, would stop every worker that takes it:
the broker's take (:mod:`voxqueue.broker.transport`) moves it from the taker's in-flight list to
:data:`DEAD_LETTER` instead, in one script (it is never in both lists, nor in neither), keeps the
newest :data:`DEAD_LETTER_MAX`, and logs its first bytes. ``voxqueue doctor`` shows them.
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

import redis

from voxqueue.contracts.dead_letter import DeadLetter

#: The dead-letter list (newest first), and how many items it keeps at most.
DEAD_LETTER = "_voxqueue.dead-letter"
DEAD_LETTER_MAX = 1000
#: How many of an item's first bytes a log line and ``voxqueue doctor`` show.
HEAD_BYTES = 32

log = logging.getLogger("voxqueue.broker")

# KEYS: the in-flight list, the dead-letter list; ARGV: the item, its entry, the bound. The
# item leaves the in-flight list and its entry joins the dead letters in one step (0: the item
# was no longer in flight, handed back by a sweep: it will be taken again).
_BURY = """
if redis.call('lrem', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call('lpush', KEYS[2], ARGV[2])
redis.call('ltrim', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
"""


def head_of(item: bytes) -> str:
    """The first bytes of ``item``, escaped for a log line (a bytes literal without ``b''``)."""
    return repr(item[:HEAD_BYTES])[2:-1] + ("…" if len(item) > HEAD_BYTES else "")


def bury(client: Any, inflight: str, queue: str, item: bytes, reason: str) -> bool:
    """Move ``item`` from the in-flight list ``inflight`` to the dead letters, with ``queue``,
    the time and ``reason``, and log it. Returns whether it was still in flight."""
    try:
        text: str | None = item.decode()
    except UnicodeDecodeError:
        text = None
    entry = DeadLetter(queue=queue, at=time.time(), reason=reason, head=head_of(item),
                       item=text, item_b64=None if text is not None else
                       base64.b64encode(item).decode())
    moved = bool(client.eval(_BURY, 2, inflight, DEAD_LETTER, item, entry.model_dump_json(),
                             DEAD_LETTER_MAX))
    if moved:
        log.warning("queue %s: an item moved to the dead letters (%s), %s; its first bytes: %s",
                    queue, DEAD_LETTER, reason, entry.head)
    return moved


def dead_letters(client: redis.Redis, newest: int) -> tuple[int, list[DeadLetter]]:
    """How many dead letters there are, and the ``newest`` ones (an unreadable entry is
    shown as such, not skipped)."""
    pipe = client.pipeline(transaction=False)
    pipe.llen(DEAD_LETTER)
    pipe.lrange(DEAD_LETTER, 0, newest - 1)
    count, raw = pipe.execute()
    out = []
    for entry in raw:
        try:
            out.append(DeadLetter.model_validate_json(entry))
        except ValueError as exc:
            out.append(DeadLetter(queue="?", at=0.0, reason=f"unreadable entry: {exc}"[:120],
                                  head=head_of(entry)))
    return int(count), out


def doctor_rows(client: redis.Redis, newest: int = 5) -> list[tuple[str, bool, str, str]]:
    """``voxqueue doctor``'s rows (name, ok, detail, fix): how many dead letters, then the
    newest ones (queue, when, reason, first bytes)."""
    try:
        count, found = dead_letters(client, newest)
    except redis.RedisError as exc:
        return [("dead letters", True, f"not read: {exc}", "")]
    if not count:
        return [("dead letters", True, "none", "")]
    rows = [("dead letters", False, f"{count} queue item(s) that were not messages, in "
             f"{DEAD_LETTER} (newest {len(found)} below)",
             f"read them (redis-cli LRANGE {DEAD_LETTER} 0 -1), fix their sender, then "
             f"DEL {DEAD_LETTER}")]
    for d in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.at))
        rows.append((f"dead letter: {d.queue}", False, f"{when} {d.reason}: {d.head}", ""))
    return rows
