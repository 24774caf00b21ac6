"""What the server says unasked (timers, reminders, monitor alerts) on the device's stream.

Entries have ``e`` (JSON: ``{"v": 1, "type": "announcement", "kind", "text", "ts", ...}``) and
optionally ``pcm`` (16 kHz mono int16, ready to play). A background thread reads them with
``XREAD BLOCK``; it is also the device's heartbeat: its errors and recoveries tell the device
whether Redis can be reached, and it reconnects with backoff. After a reconnection it reads on
from the last entry it saw, so what was said meanwhile is still spoken (unless stale).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from edge.link import Backoff, Link, is_connection_error
from voxqueue.client.gateway import GatewayClient
from voxqueue.keys import Keys
from voxqueue.redis_conn import connect
from voxqueue.settings import ClientSettings

log = logging.getLogger("voxqueue.edge")


@dataclass(frozen=True)
class Announcement:
    id: str
    kind: str
    text: str
    ts: float
    pcm: bytes | None = None


def parse(entry_id: bytes | str, fields: Mapping[bytes, bytes]) -> Announcement | None:
    """The announcement in one stream entry, or None when it is not one we can speak."""
    ident = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    try:
        data = json.loads(fields.get(b"e", b"{}"))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != "announcement":
        return None
    text = str(data.get("text") or "").strip()
    pcm = fields.get(b"pcm") or None
    if not text and not pcm:
        return None
    try:
        ts = float(data.get("ts") or time.time())
    except (TypeError, ValueError):
        ts = time.time()
    return Announcement(ident, str(data.get("kind") or "announcement"), text, ts, pcm)


Fields = Mapping[bytes, bytes]


class Feed(Protocol):
    """Where a device's announcements come from: its Redis stream, or the gateway."""

    def newest_id(self) -> str: ...

    def read(self, after: str, block_ms: int) -> list[tuple[str, Fields]]: ...

    def close(self) -> None: ...


class RedisFeed:
    """The device's stream in Redis (a trusted single machine)."""

    def __init__(self, settings: ClientSettings, stream: str, block_ms: int) -> None:
        self.stream = stream
        # No retries inside the client: a lost server is noticed at once and retried here.
        self.r = connect(settings, patient=False, socket_timeout=block_ms / 1000 + 5)

    def newest_id(self) -> str:
        newest: Any = self.r.xrevrange(self.stream, count=1)
        return str(newest[0][0].decode()) if newest else "0-0"

    def read(self, after: str, block_ms: int) -> list[tuple[str, Fields]]:
        answer: Any = self.r.xread({self.stream: after}, count=20, block=block_ms)
        return [(i.decode() if isinstance(i, bytes) else i, f)
                for _key, entries in answer or [] for i, f in entries]

    def close(self) -> None:
        self.r.connection_pool.disconnect()  # ends a blocked XREAD at once
        self.r.close()


class GatewayFeed:
    """The device's announcements through the gateway (long polls with the device's token)."""

    def __init__(self, client: GatewayClient) -> None:
        self.client = client

    def newest_id(self) -> str:
        return self.client.entries(ANNOUNCEMENTS, None, 0).last_id

    def read(self, after: str, block_ms: int) -> list[tuple[str, Fields]]:
        got = self.client.entries(ANNOUNCEMENTS, after, block_ms)
        out: list[tuple[str, Fields]] = []
        for e in got.entries:
            fields = {b"e": json.dumps(e.event).encode()}
            if (pcm := e.pcm_bytes()) is not None:
                fields[b"pcm"] = pcm
            out.append((e.id, fields))
        return out

    def close(self) -> None:
        """The client is the device's, closed with it."""


ANNOUNCEMENTS = "/v1/announcements"


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class AnnouncementListener:
    """Reads the device's announcements in a thread and hands each one to ``deliver``."""

    def __init__(
        self,
        feed: Feed,
        link: Link,
        deliver: Callable[[Announcement], None],
        *,
        block_ms: int = 2000,
        max_age_s: float = 600.0,
    ) -> None:
        self.feed = feed
        self.link = link
        self.deliver = deliver
        self.block_ms = block_ms
        self.max_age_s = max_age_s
        self.last_id: str | None = None
        """The last entry read; None until the first read, which starts after the stream's
        newest entry. Every later read, after a reconnection too, goes on from here."""
        self.started_ms = int(time.time() * 1000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="edge-announcements", daemon=True)
        self.backoff = Backoff()

    def start(self) -> None:
        self.started_ms = int(time.time() * 1000)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self.feed.close()
        self._thread.join(timeout=self.block_ms / 1000 + 2)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._read_once()
                self.link.ok()
                self.backoff.reset()
            except Exception as exc:
                if self._stop.is_set():
                    return
                if is_connection_error(exc):
                    self.link.failed(f"{exc.__class__.__name__}: {exc}")
                else:
                    log.exception("announcements: unexpected error")
                self._stop.wait(self.backoff.next())

    def _read_once(self) -> None:
        if self.last_id is None:
            # Kept when the server cannot be reached now: entry ids are the server's
            # milliseconds, so what is added while we reconnect is still read (clocks agreeing).
            self.last_id = f"{self.started_ms}-0"
            # After what existed before we started; not after what came since.
            self.last_id = min(self.feed.newest_id(), self.last_id, key=_order)
        for entry_id, fields in self.feed.read(self.last_id, self.block_ms):
            self.last_id = entry_id
            item = parse(entry_id, fields)
            if item is None:
                log.warning("announcements: skipped an entry that is not one: %s", entry_id)
            elif time.time() - item.ts > self.max_age_s:
                log.warning("announcements: skipped a stale one (%s)", item.text)
            else:
                self.deliver(item)


def feed_for(client: object, settings: ClientSettings, device: str) -> Feed:
    """A device's announcements through the gateway when it uses one, else from Redis."""
    if isinstance(client, GatewayClient):
        return GatewayFeed(client)
    stream = Keys(settings.redis.key_prefix).announcements(device)
    return RedisFeed(settings, stream, block_ms=2000)
