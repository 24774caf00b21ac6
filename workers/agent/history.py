"""A session's chat history in Redis: a list of JSON messages with a TTL.

The session's taint (``Keys.session_untrusted``: the history holds text others wrote) lives as
long as the text: every write of the history, a compaction's or a repair's included, gives
the taint the history's TTL again (a key that is not there stays absent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import redis

from voxqueue.keys import Keys
from voxqueue.once import Fence, Once
from workers.agent.messages import Message


class History:
    def __init__(self, r: redis.Redis, keys: Keys, session_id: str, ttl_s: int) -> None:
        self.r = r
        self.key = keys.messages(session_id)
        self.taint_key = keys.session_untrusted(session_id)
        self.ttl_s = ttl_s

    def load(self) -> list[Message]:
        return [json.loads(item) for item in self.r.lrange(self.key, 0, -1)]

    def tail(self, n: int) -> list[Message]:
        """The last ``n`` messages (all of them when there are fewer)."""
        return [json.loads(item) for item in self.r.lrange(self.key, -n, -1)]

    def append(self, *messages: Message) -> None:
        self.extend(messages)

    def extend(self, messages: Iterable[Message]) -> None:
        self.extend_in(Once(self.r), messages).run()

    def extend_in(self, once: Once, messages: Iterable[Message]) -> Once:
        """Add the append to ``once``: the messages go in together with its other writes, or
        not at all."""
        items = [json.dumps(m, ensure_ascii=False) for m in messages]
        if items:
            once.call("RPUSH", self.key, *items).call("EXPIRE", self.key, self.ttl_s)
            once.call("EXPIRE", self.taint_key, self.ttl_s)
        return once

    def replace(self, messages: Iterable[Message], *, expect_len: int | None = None,
                fence: Fence | None = None) -> bool:
        """Swap the whole history atomically; False (nothing written) when ``expect_len`` is
        given and the list no longer has that length, or it changed meanwhile, or (given a
        ``fence``) the writer is no longer its job's newest attempt."""
        items = [json.dumps(m, ensure_ascii=False) for m in messages]
        with self.r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self.key, *([fence.key] if fence else []))
                if expect_len is not None and int(pipe.llen(self.key)) != expect_len:
                    return False
                if fence is not None and pipe.get(fence.key) != str(fence.attempt).encode():
                    return False
                pipe.multi()
                pipe.delete(self.key)
                if items:
                    pipe.rpush(self.key, *items)
                    pipe.expire(self.key, self.ttl_s)
                    pipe.expire(self.taint_key, self.ttl_s)  # a summary still holds the text
                pipe.execute()
            except redis.WatchError:
                return False
        return True

    def __len__(self) -> int:
        return int(self.r.llen(self.key))
